"""`validator preflight`: every rank rehearses the rendezvous, all agree on one verdict."""
