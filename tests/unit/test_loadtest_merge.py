"""Distributed Locust: the master's merge of its workers' job rows (qsim.loadtest.thresholds.merge_rows)."""

from __future__ import annotations


def test_merged_load_test_rows_keep_each_job_once_preferring_a_seen_end() -> None:
    from qsim.loadtest.thresholds import ROW_COLUMNS, merge_rows

    def part(*rows: tuple[str, str, float]) -> dict[str, list[object]]:
        out: dict[str, list[object]] = {c: [] for c in ROW_COLUMNS}
        for job_id, outcome, finished in rows:
            values = dict.fromkeys(ROW_COLUMNS, "")
            values.update(job_id=job_id, type="a", enqueued=1.0, started=2.0, finished=finished, outcome=outcome)
            for c in ROW_COLUMNS:
                out[c].append(values[c])
        return out

    # Given worker 1 added j1 and j2 but saw only j2 end; worker 2 (observing) saw j1 end, and added j3
    nan = float("nan")
    w1 = part(("j1", "unfinished", nan), ("j2", "completed", 4.0))
    w2 = part(("j1", "completed", 5.0), ("j3", "dead", 6.0))
    # Then each job is there once, with the end a worker saw, whatever the order the parts arrive in
    for parts in ([w1, w2], [w2, w1]):
        merged = merge_rows(parts)
        got = dict(zip(merged["job_id"], zip(merged["outcome"], merged["finished"])))
        assert got == {"j1": ("completed", 5.0), "j2": ("completed", 4.0), "j3": ("dead", 6.0)}
