"""The CLI on a copy of the golden store with a commit-log file missing in the middle: inspect and verify report
the missing file and the lost offsets per queue, dump and query say so when asked for them."""

import json
from collections import Counter

from tests.cli.test_cli import run_here as run
from tests.store.read.test_lost_ranges_middle import drop_files, in_gaps


def test_inspect_verify_dump_query_on_a_copy_with_a_missing_file(golden_copy, manifest):
    gaps = drop_files(golden_copy, (10,))
    missing = f"{gaps[0][0]:020d}"
    lost = Counter((m["topic"], m["queueId"]) for m in manifest
                   if m["inConsumeQueue"] and in_gaps(m["commitLogOffset"], gaps))

    info = json.loads(run("inspect", golden_copy, "--json").stdout)
    assert info["missing_commitlog_files"] == [missing]
    assert {(r["topic"], r["queueId"]): r["messages"] for r in info["lost"]} == dict(lost)
    assert all(r["missing_file"] and r["file"].endswith(f"{missing} (missing)") for r in info["lost"])
    kept = Counter((m["topic"], m["queueId"]) for m in manifest
                   if m["inConsumeQueue"] and not in_gaps(m["commitLogOffset"], gaps))
    assert {t["topic"]: t["messages"] for t in info["topics"]} == \
        {t: sum(n for (tt, _), n in kept.items() if tt == t) for t in {t for t, _ in kept}}
    shown = run("inspect", golden_copy).stdout
    assert missing in shown and "messages lost" in shown

    out = run("verify", golden_copy, check=False)
    assert out.returncode == 1
    # a problem per lost range (one per queue here) and one for the missing file
    assert f"{len(lost) + 1} problem(s)" in out.stdout and "commit-log file missing between others" in out.stdout
    assert out.stdout.count("lost messages") == len(lost)

    victim = max(lost, key=lambda k: lost[k])
    dumped = run("dump", golden_copy, "--topic", victim[0], "--queue", victim[1], "--format", "jsonl", check=False)
    assert dumped.returncode == 2 and "DataLoss" not in dumped.stdout
    assert f"{victim[0]}/{victim[1]} offsets" in dumped.stderr and missing in dumped.stderr
    everything = run("dump", golden_copy, "--format", "jsonl")
    assert missing in everything.stderr and "not in this dump" in everything.stderr
    assert len(everything.stdout.splitlines()) == sum(1 for m in manifest if not in_gaps(m["commitLogOffset"], gaps))
    gone = next(m for m in manifest if in_gaps(m["commitLogOffset"], gaps) and m["inConsumeQueue"])
    query = run("query", golden_copy, "--topic", gone["topic"], "--queue", gone["queueId"], "--offset",
                gone["cqOffset"], check=False)
    assert query.returncode == 2 and missing in query.stderr and "lost messages" in query.stderr
    assert run("query", golden_copy, "--msg-id", gone["msgId"], check=False).returncode == 1
