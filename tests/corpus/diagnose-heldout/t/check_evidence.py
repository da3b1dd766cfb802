#!/usr/bin/env python3
"""Standalone check for this held-out set: every label's evidence is a verbatim substring of its case file,
every case file has exactly one label, sources are unique, classes are among the 14."""
import json, os, sys
HERE = os.path.dirname(os.path.abspath(__file__))
CLASSES = {"rendezvous_timeout", "nccl_system_error", "cuda_error", "collective_timeout", "oom",
           "child_failed_other", "nccl_remote_error", "missing_rank", "connection_refused", "address_in_use",
           "collective_mismatch", "nccl_init_duplicate_gpu", "nccl_init_no_interface", "nccl_version_mismatch"}
KEYS = {"file", "source", "class", "initiating_rank", "initiating_host", "rank_set", "evidence", "notes"}
labels = [json.loads(l) for l in open(os.path.join(HERE, "labels.jsonl")) if l.strip()]
files = sorted(os.listdir(os.path.join(HERE, "cases")))
bad = 0
for d in labels:
    if set(d) != KEYS:
        print("keys", d["file"], set(d) ^ KEYS); bad += 1
    if d["class"] not in CLASSES:
        print("class", d["file"], d["class"]); bad += 1
    text = open(os.path.join(HERE, "cases", d["file"]), encoding="utf-8").read()
    if d["evidence"] not in text:
        print("evidence not verbatim:", d["file"]); bad += 1
    if len(text.encode()) > 40_000:
        print("too big", d["file"]); bad += 1
if sorted(d["file"] for d in labels) != files:
    print("file/label mismatch", set(files) ^ {d["file"] for d in labels}); bad += 1
srcs = [d["source"] for d in labels]
if len(set(srcs)) != len(srcs):
    print("duplicate source"); bad += 1
print(f"{len(labels)} labels, {bad} problems")
sys.exit(1 if bad else 0)
