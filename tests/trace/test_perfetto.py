# SPDX-License-Identifier: MIT
"""`ftpad dump --perfetto` (trace/perfetto.c) decoded by protoc with
Perfetto's schema (tests/trace/perfetto/perfetto_trace.proto: Perfetto's
names and numbers of the fields ftpad writes), then read as Perfetto's
trace processor reads it: each thread a sequence whose first packet clears
its state and sets its defaults, names interned before use, timestamps as
steps of the sequence's incremental clock.  The slices must come out with
the trace's names, nesting and nanoseconds, and the file at 12 bytes an
event or less."""
import re
import shutil

import pytest

from ftpadtest import ROOT, run
from test_trace_view import Scenario, ftpad, gen, scenario_a, scenario_b, scenario_c  # noqa: F401

SCHEMA_DIR = ROOT / "tests" / "trace" / "perfetto"
SEQ_INCREMENTAL_STATE_CLEARED, SEQ_NEEDS_INCREMENTAL_STATE = 1, 2
BOOTTIME = 6
MAX_BYTES_PER_EVENT = 12


@pytest.fixture(scope="session")
def protoc():
    exe = shutil.which("protoc")
    if not exe:
        pytest.skip("protoc is missing: scripts/install-deps.sh installs it (protobuf-compiler)")
    return exe


def parse_text_format(text):
    """protoc --decode's text format as nested lists of (name, value);
    a field protoc knows only by number (not in the schema) fails."""
    root, stack = [], []
    cur = root
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        assert not line[0].isdigit(), f"a field outside Perfetto's schema: {line}"
        if line.endswith("{"):
            child = []
            cur.append((line[:-1].strip(), child))
            stack.append(cur)
            cur = child
        elif line == "}":
            cur = stack.pop()
        else:
            name, value = line.split(": ", 1)
            if value.startswith('"'):
                value = value[1:-1].encode("latin-1").decode("unicode_escape")
            elif re.fullmatch(r"-?\d+", value):
                value = int(value)
            elif value in ("true", "false"):
                value = value == "true"
            cur.append((name, value))
    return root


def fields(message):
    """{name: [values]} of a parsed message."""
    out = {}
    for name, value in message:
        out.setdefault(name, []).append(value)
    return out


def one(message, name, default=None):
    values = fields(message).get(name)
    if values is None:
        return default
    assert len(values) == 1, (name, values)
    return values[0]


def decode(protoc, path):
    text = run([protoc, f"-I{SCHEMA_DIR}", "--decode=perfetto.protos.Trace",
                "perfetto_trace.proto"], stdin=open(path, "rb")).stdout
    return [fields(p) | {"_raw": p} for _, p in parse_text_format(text)]


class Sequence:
    """A packet sequence's incremental state, as the trace processor keeps it."""

    def __init__(self):
        self.valid = False
        self.names, self.categories, self.clocks = {}, {}, {}
        self.default_clock = self.track = None


def read_trace(packets):
    """The tracks (uuid: descriptor) and every track event as
    (track, ts, type, name, [categories]), in file order."""
    tracks, sequences, events = {}, {}, []
    for p in packets:
        raw = p["_raw"]
        if "track_descriptor" in p:
            d = fields(p["track_descriptor"][0])
            tracks[d["uuid"][0]] = d
            continue
        seq_id = one(raw, "trusted_packet_sequence_id")
        assert seq_id, f"a packet outside any sequence: {raw}"
        flags = one(raw, "sequence_flags", 0)
        if flags & SEQ_INCREMENTAL_STATE_CLEARED:
            sequences[seq_id] = Sequence()
            sequences[seq_id].valid = True
        seq = sequences[seq_id]
        assert seq.valid, "a sequence used before its state was cleared"
        if "trace_packet_defaults" in p:
            d = p["trace_packet_defaults"][0]
            seq.default_clock = one(d, "timestamp_clock_id")
            seq.track = one(one(d, "track_event_defaults"), "track_uuid")
        if "interned_data" in p:
            assert flags & SEQ_NEEDS_INCREMENTAL_STATE, "interned data in a packet not flagged"
            interned = fields(p["interned_data"][0])
            for kind, table in (("event_names", seq.names), ("event_categories", seq.categories)):
                for entry in interned.get(kind, []):
                    iid, name = one(entry, "iid"), one(entry, "name")
                    assert iid not in table, f"iid {iid} given twice in a sequence"
                    table[iid] = name
        if "clock_snapshot" in p:
            snap = p["clock_snapshot"][0]
            assert one(snap, "primary_trace_clock") == "BUILTIN_CLOCK_BOOTTIME"
            clocks = {one(c, "clock_id"): c for _, c in snap if _ == "clocks"}
            assert one(clocks[BOOTTIME], "timestamp") == one(clocks[64], "timestamp")
            assert one(clocks[64], "is_incremental") is True
            seq.clocks[64] = one(clocks[64], "timestamp")
            continue
        if "track_event" not in p:
            continue
        clock = one(raw, "timestamp_clock_id", seq.default_clock)
        if clock == BOOTTIME:
            ts = one(raw, "timestamp")
        else:
            seq.clocks[clock] += one(raw, "timestamp")
            ts = seq.clocks[clock]
        e = p["track_event"][0]
        name = one(e, "name")
        if one(e, "name_iid") is not None:
            name = seq.names[one(e, "name_iid")]
        cats = [seq.categories[i] for i in fields(e).get("category_iids", [])]
        events.append((one(e, "track_uuid", seq.track), ts, one(e, "type"), name, cats))
    return tracks, events


def slices(events):
    """Begin/end events paired per track by nesting: (track, name, begin,
    end, depth, end categories)."""
    out, stacks = [], {}
    for track, ts, typ, name, cats in events:
        stack = stacks.setdefault(track, [])
        if typ == "TYPE_SLICE_BEGIN":
            stack.append((name, ts, cats))
        elif typ == "TYPE_SLICE_END":
            begin_name, begin, begin_cats = stack.pop()
            out.append((track, begin_name, begin, ts, len(stack), cats))
    assert all(not s for s in stacks.values()), "slices left open"
    return sorted(out, key=lambda s: (s[0], s[2], s[4]))


def test_scenario_a_decodes_with_perfettos_schema(tmp_path, gen, protoc):
    out = tmp_path / "a.pftrace"
    ftpad("dump", "--perfetto", scenario_a(tmp_path, gen), "-o", out)
    tracks, events = read_trace(decode(protoc, out))
    process, thread = tracks.values()
    assert one(process["process"][0], "pid") == 100
    assert one(process["process"][0], "process_name") == "/bin/prog"
    assert fields(thread["thread"][0]) == {"pid": [100], "tid": [100], "thread_name": ["prog"]}
    assert thread["parent_uuid"] == process["uuid"]
    assert {e[0] for e in events} == set(thread["uuid"])
    names = [(name, begin, end, depth) for _, name, begin, end, depth, _ in slices(events)]
    assert names == [("main", 0, 2500, 0), ("fib", 100, 700, 1), ("fib", 200, 500, 2),
                     ("leaf", 300, 400, 3), ("tailer", 1000, 1100, 1),
                     ("target", 1100, 1500, 1), ("old", 1600, 1600, 1),
                     ("[signal SIGUSR1]", 1800, 2100, 1), ("handler", 1900, 2000, 2)]
    cats = {e[3]: e[4] for e in events if e[2] == "TYPE_SLICE_BEGIN"}
    assert cats["[signal SIGUSR1]"] == ["signal"] and cats["old"] == ["entry_only"]
    assert cats["main"] == [] and cats["fib"] == []
    assert [(e[1], e[3], e[4]) for e in events if e[2] == "TYPE_INSTANT"] == [
        (1700, "LOST 2 events: buffer full", ["lost"])]


def test_each_thread_is_a_sequence_and_a_track(tmp_path, gen, protoc):
    out = tmp_path / "c.pftrace"
    ftpad("dump", "--perfetto", scenario_c(tmp_path, gen), "-o", out)
    packets = decode(protoc, out)
    tracks, events = read_trace(packets)
    threads = {uuid: fields(d["thread"][0]) for uuid, d in tracks.items() if "thread" in d}
    by_thread = {}
    for track, name, begin, end, depth, _ in slices(events):
        t = threads[track]
        by_thread.setdefault((t["pid"][0], t["tid"][0], t["thread_name"][0]), []).append(
            (name, begin, end, depth))
    assert by_thread == {
        (300, 300, "par"): [("main", 0, 30, 0), ("work", 10, 20, 1)],
        (300, 301, "worker"): [("work", 5, 15, 0), ("leaf", 9, 12, 1)],
        (300, 300, "next"): [("main", 100, 130, 0), ("step", 110, 111, 1)],
        (302, 302, "par"): [("leaf", 11, 13, 0)],
    }
    # every sequence starts over: its own names and its own clock
    cleared = [one(p["_raw"], "trusted_packet_sequence_id") for p in packets
               if one(p["_raw"], "sequence_flags", 0) & SEQ_INCREMENTAL_STATE_CLEARED]
    assert cleared == [1, 2, 3, 4]


def test_unwound_frames_end_with_their_category(tmp_path, gen, protoc):
    out = tmp_path / "b.pftrace"
    ftpad("dump", "--perfetto", scenario_b(tmp_path, gen), "-o", out)
    _, events = read_trace(decode(protoc, out))
    ends = [e[4] for e in events if e[2] == "TYPE_SLICE_END"]
    # replay's "# 25 events, 13 frames unwound"
    assert ends.count(["unwound"]) == 13 and set(map(tuple, ends)) == {(), ("unwound",)}
    assert [e[3] for e in events if e[2] == "TYPE_SLICE_BEGIN"][:4] == ["main", "a", "b", "c"]


def test_a_clock_that_goes_back_is_said_absolutely(tmp_path, gen, protoc):
    s = Scenario(tmp_path / "back.trace")
    s.image("400.0", "/bin/back", ["main", "f"])
    s.thread(400, "back").evs([(1000, "entry", "main", 5000), (900, "entry", "f", 4900),
                               (950, "exit", "f", 4900), (2000, "exit", "main", 5000)])
    out = tmp_path / "back.pftrace"
    ftpad("dump", "--perfetto", s.write(gen), "-o", out)
    packets = decode(protoc, out)
    _, events = read_trace(packets)
    assert [(e[1], e[2], e[3]) for e in events] == [
        (1000, "TYPE_SLICE_BEGIN", "main"), (900, "TYPE_SLICE_BEGIN", "f"),
        (950, "TYPE_SLICE_END", None), (2000, "TYPE_SLICE_END", None)]
    assert [one(p["_raw"], "timestamp_clock_id") for p in packets if "track_event" in p] == [
        None, BOOTTIME, BOOTTIME, None]


# --- size: a deterministic trace of a real tree's shape

def tree_events(count):
    """main calling 64 functions in turn, each a few more down to depth 6
    (bench/trace_gen.c's shape), with steps of 10 to 1,500 ns between
    events, as instrumented calls of small and middling functions have."""
    events, now, step = [], 0, 0

    def put(kind, f, sp):
        nonlocal now, step
        step += 1
        now += 10 + (step * 7919) % 97 * (1 if step % 16 else 15)
        events.append((now, kind, f"func_{f:02}", sp))

    def call(f, sp, depth):
        put("entry", f, sp)
        i = 0
        while depth < 6 and i < (f + depth) % 3 and len(events) + 4 < count:
            call((f * 7 + i * 13 + depth) % 64, sp - 64, depth + 1)
            i += 1
        put("exit", f, sp)

    while len(events) + 2 <= count:
        call(len(events) // 2 % 64, 0x7fff0000, 0)
    return events


def test_twelve_bytes_an_event_or_less(tmp_path, gen):
    events = tree_events(20000)
    s = Scenario(tmp_path / "tree.trace")
    s.image("1.0", "/bench", [f"func_{f:02}" for f in range(64)])
    trace = s.thread(1, "bench").evs(events).write(gen)
    out = tmp_path / "tree.pftrace"
    ftpad("dump", "--perfetto", trace, "-o", out)
    per_event = out.stat().st_size / len(events)
    assert per_event <= MAX_BYTES_PER_EVENT, f"{per_event:.2f} bytes an event"
