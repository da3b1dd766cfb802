"""The facts body in texts that are each parsed once per distinct value.

Most of a node's facts are the same on every node of a job (versions, limits), and the same
again on each of a node's ranks (its GPUs, its interfaces). A participant therefore sends its
facts as three JSON objects of top-level fields: what is its own (its pid, its launch, its
environment), what is its node's (GROUPS["node"]) and what is usually the whole job's
(GROUPS["job"]); a node leader sends each distinct text of its ranks once:

    header  "chunks": [n0, n1, ...]                 the body is these texts, one after another
            "sections": [[name, i], ...]            one participant: its text ``name`` is chunk i
            "ranks": [{"mac", "token", "sections": [[name, i], ...]}, ...]     a node leader's ranks

A rank's MAC is over its texts joined in its order, so a leader cannot alter what a member
signed. The coordinator parses a chunk once per frame, and a "node" or "job" text once per job
(``Parsed``: the same bytes give the same, never mutated, object, so a participant can only
ever add its own text, never alter another's), and checks each text's fields against the schema
once. The coordinator announces this layout in its hello ("sections": 1); toward a coordinator
that does not, the facts go as one JSON document, and a body without "chunks" is read as one
document (a participant of an older validator), or as a leader's ranks one after another (its
"ranks" carrying each one's "size").
"""

from __future__ import annotations

import json

from validator.preflight import protocol as wire

TYPE_CHECKING = False  # typing is not loaded on a participant's launch path (test_lean.py)
if TYPE_CHECKING:
    from typing import Any

# The facts' fields (validator/model.py: Facts) that a node's ranks, or a job's nodes, usually
# share; every other field goes in the rank's own text, "". tests/unit/test_sections.py holds
# these to the model.
GROUPS = {"node": ("gpus", "network", "system"), "job": ("software", "errors", "ib")}
GROUPED = frozenset(f for fields in GROUPS.values() for f in fields)
NAMES = frozenset(("", *GROUPS))
LOCAL_MAX = 64  # ranks in one leader's frame (local.LOCAL_MAX)
MAX_CHUNKS = LOCAL_MAX * len(NAMES)
MAX_GROUP = 16 << 20  # bytes the ranks of one frame sign, in all (what a leader may make us join and parse)

Pieces = list[tuple[str, bytes]]  # (text name, the JSON object), in a rank's order
Rank = tuple[str, object, list[tuple[str, int]]]  # read(): token, mac, its texts as (name, chunk index)


def pieces(facts: Any) -> Pieces:
    """A participant's facts as texts: its own fields first, then its node's and its job's."""
    dumps = json.JSONEncoder(separators=(",", ":")).encode
    out = [("", dumps({k: v for k, v in facts.items() if k not in GROUPED}).encode())]
    for name, fields in GROUPS.items():
        if any(k in facts for k in fields):
            out.append((name, dumps({k: facts[k] for k in fields if k in facts}).encode()))
    return out


def document(parts: Pieces) -> bytes:
    """The same facts as one JSON document (for a coordinator that reads no sections)."""
    return b"{" + b",".join(text[1:-1] for _, text in parts if text != b"{}") + b"}"


def signed(parts: Pieces) -> bytes:
    """What a rank's MAC covers: its texts joined, in its order."""
    return b"".join(text for _, text in parts)


def layout(ranks: list[Pieces]) -> tuple[list[int], list[list[list[Any]]], bytes]:
    """The ranks' texts as a frame: the distinct texts once each ("chunks"), each rank's
    sections as [name, chunk index], and the body."""
    index: dict[bytes, int] = {}
    chunks: list[bytes] = []
    refs = []
    for parts in ranks:
        mine = []
        for name, text in parts:
            i = index.setdefault(text, len(chunks))
            if i == len(chunks):
                chunks.append(text)
            mine.append([name, i])
        refs.append(mine)
    return [len(c) for c in chunks], refs, b"".join(chunks)


def read(header: dict[str, Any], size: int, token: str) -> tuple[list[Rank], list[tuple[int, int]]]:
    """The frame's ranks, each (token, mac, its texts as [(name, chunk index)]), and where each
    chunk lies in the body; checked against every bound before anything is joined or parsed. A
    body without "chunks" is one whole document a rank (an older validator's layout). Raises
    ProtocolError."""
    ranks = header.get("ranks")
    if ranks is not None and (not isinstance(ranks, list) or not 1 <= len(ranks) <= LOCAL_MAX or size > MAX_GROUP):
        raise wire.ProtocolError(f"bad ranks of a node leader ({wire.short(ranks)})")
    entries = ranks if ranks is not None else [{"mac": header.get("mac"), "sections": header.get("sections")}]
    chunks = header.get("chunks")
    out: list[Rank] = []
    if chunks is None:
        sizes: list[int] = []
        for k, r in enumerate(entries):
            n = r.get("size") if isinstance(r, dict) and ranks is not None else size
            if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= wire.MAX_FACTS:
                raise wire.ProtocolError("bad rank entry in a node leader's header")
            out.append((_token(r, ranks, token), r.get("mac"), [("", k)]))
            sizes.append(n)
        if sum(sizes) != size:
            raise wire.ProtocolError("the ranks' sizes do not add up to the facts size")
        return out, bounds(sizes)
    if not isinstance(chunks, list) or not 0 < len(chunks) <= MAX_CHUNKS:
        raise wire.ProtocolError(f"bad chunks ({wire.short(chunks)})")
    if not all(type(n) is int and 0 < n <= wire.MAX_FACTS for n in chunks) or sum(chunks) != size:
        raise wire.ProtocolError("the chunks' sizes do not add up to the facts size")
    joined, last = 0, len(chunks)
    for r in entries:
        refs = r.get("sections") if isinstance(r, dict) else None
        if not isinstance(refs, list) or not 0 < len(refs) <= len(NAMES):
            raise wire.ProtocolError("bad sections in a facts header")
        parts: list[tuple[str, int]] = []
        mine = 0
        for ref in refs:
            name, i = ref if type(ref) is list and len(ref) == 2 else (None, None)
            if type(name) is not str or name not in NAMES or type(i) is not int or not 0 <= i < last:
                raise wire.ProtocolError(f"bad section {wire.short(ref)} in a facts header")
            parts.append((name, i))
            mine += chunks[i]
        if len(dict(parts)) != len(parts):
            raise wire.ProtocolError("a section twice in a facts header")
        joined += mine
        if mine > wire.MAX_FACTS or joined > MAX_GROUP:
            raise wire.ProtocolError("a rank's sections are over the facts size limit")
        out.append((_token(r, ranks, token), r.get("mac"), parts))
    return out, bounds(chunks)


def _token(entry: Any, ranks: object, token: str) -> str:
    """A leader's rank's own token (the header's for one participant)."""
    if ranks is None:
        return token
    t = entry.get("token") if isinstance(entry, dict) else None
    if not good_token(t):
        raise wire.ProtocolError("bad rank entry in a node leader's header")
    return t  # type: ignore[return-value]


def good_token(t: object) -> bool:
    """What a leader's rank must present: its own token."""
    return isinstance(t, str) and 0 < len(t) <= wire.TOKEN_MAX


def bounds(chunks: list[int]) -> list[tuple[int, int]]:
    out, at = [], 0
    for n in chunks:
        out.append((at, at + n))
        at += n
    return out


class Parsed:
    """The coordinator's texts: a "node" or "job" text seen before gives the object parsed then
    (checked against the schema then). Bounded: at most KEEP distinct texts per name, KEPT bytes
    in all; past that a text is parsed as if new (the "node" texts, which differ on every node,
    stop being kept after KEEP of them)."""

    KEEP = 256
    KEPT = 16 << 20

    def __init__(self) -> None:
        from validator import model
        from validator.facts.schema import field_checks, fields_check, hints

        self.field_checks = field_checks
        self.need = frozenset(hints(model.Facts))  # every field of the facts
        own = tuple(k for k in hints(model.Facts) if k not in GROUPED)
        # each text as participants of this version send it: its fields exactly, checked in one call
        self.exact = {name: fields_check(fields, exact=True) for name, fields in (("", own), *GROUPS.items())}
        self.known: dict[tuple[str, bytes], tuple[Any, bool]] = {}
        self.count = dict.fromkeys(GROUPS, 0)
        self.bytes = 0

    def parse(self, texts: list[tuple[str, bytes]]) -> list[tuple[Any, bool]]:
        """For each (name, text): (the parsed value, whether it matches its field's schema), the
        texts not seen before parsed in one pass. Raises ProtocolError."""
        known = self.known
        got: list[tuple[Any, bool] | None] = [known.get(t) if t[0] else None for t in texts]
        new = [i for i, g in enumerate(got) if g is None]
        if new:
            oks: list[bool] = []
            names = iter([texts[i][0] for i in new])
            matches = self._matches

            def shallow(v: Any) -> bool:  # the schema bounds the depth: no walk for it
                oks.append(matches(next(names), v))
                return oks[-1]

            values = wire.loads_many([texts[i][1] for i in new], shallow)
            for i, value, ok in zip(new, values, oks, strict=True):
                got[i] = g = (value, ok)
                if texts[i][0]:
                    self._keep(texts[i], g)
        return got  # type: ignore[return-value]

    def _keep(self, key: tuple[str, bytes], got: tuple[Any, bool]) -> None:
        name, text = key
        if self.count[name] < self.KEEP and self.bytes + len(text) <= self.KEPT:
            self.known[key] = got
            self.count[name] += 1
            self.bytes += len(text)

    def _matches(self, name: str, v: Any) -> bool:
        """An object whose fields match the schema (and whose other fields hold no more than a
        plain value: the depth is bounded without a walk)."""
        try:
            if self.exact[name](v):
                return True
            checks = self.field_checks()  # anything else (an older or newer participant's text): field by field
            return type(v) is dict and all(
                checks[k](x) if k in checks else type(x) not in (dict, list) for k, x in v.items()
            )
        except (KeyError, TypeError, AttributeError):
            return False

    def documents(self, ranks: list[Pieces]) -> list[tuple[dict[str, Any], bool]]:
        """Each rank's facts from its texts, and whether every field of the facts is there and
        matches (else the caller asks the schema what is wrong). A text that several ranks share
        is parsed once, and is one object in each. Raises ProtocolError."""
        distinct = ranks[0] if len(ranks) == 1 else list(dict.fromkeys(t for parts in ranks for t in parts))
        parsed = dict(zip(distinct, self.parse(distinct), strict=True))
        out = []
        for parts in ranks:
            doc: dict[str, Any] = {}
            ok, fields = True, 0
            for value, fine in map(parsed.__getitem__, parts):
                if type(value) is not dict:
                    raise wire.ProtocolError("a facts text that is not an object")
                ok, fields = ok and fine, fields + len(value)
                doc.update(value)
            if len(doc) != fields:
                raise wire.ProtocolError("a field of the facts in two of its texts")
            out.append((doc, ok and doc.keys() >= self.need))
        return out


def frame(ranks: list[tuple[object, str, Pieces]], split: bool, leader: bool) -> tuple[dict[str, Any], bytes]:
    """The header's fields and the body for ``ranks`` (mac, token, texts), ours first: in
    sections (``split``: the coordinator said it reads them) or as whole documents."""
    fields: dict[str, Any]
    if not split:
        bodies = [parts[0][1] if len(parts) == 1 else document(parts) for _, _, parts in ranks]
        fields = {"size": sum(map(len, bodies))}
        if leader:
            fields["ranks"] = [
                {"size": len(b), "mac": m, "token": t} for b, (m, t, _) in zip(bodies, ranks, strict=True)
            ]
        return fields, b"".join(bodies)
    sizes, refs, body = layout([parts for _, _, parts in ranks])
    fields = {"size": len(body), "chunks": sizes}
    if leader:
        fields["ranks"] = [{"mac": m, "token": t, "sections": r} for (m, t, _), r in zip(ranks, refs, strict=True)]
    else:
        fields["sections"] = refs[0]
    return fields, body


def texts(header: dict[str, Any], body: bytes) -> Pieces:
    """One participant's texts from its header and body (a leader reading its member; bounds
    as the coordinator's). Raises ProtocolError."""
    ((_, _, refs),), spans = read({k: v for k, v in header.items() if k != "ranks"}, len(body), "")
    return [(name, body[spans[i][0] : spans[i][1]]) for name, i in refs]
