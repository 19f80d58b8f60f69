"""`caplens score-corpus` on 200 rows of world data: engines agree, resume, corpus CIDEr-D, errors."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from app.cli import main
from scoring.corpus import open_manifest, read_manifest, read_scores, score_corpus

REPO = Path(__file__).resolve().parents[2]
JAVA = shutil.which("java") is not None
METRICS = ["CLIP-S", "RefCLIP-S", "MCS"] + (["CIDEr"] if JAVA else [])
BATCH = 20  # 200 rows: 10 batches


@pytest.fixture(scope="module")
def world_corpus(tmp_path_factory) -> Path:
    """100 world scenes captioned by two models: `good` (the scene's caption) and `shifted`
    (the next scene's caption), with the scenes' references; 200 manifest rows."""
    from scoring.world.sets import split_scenes, write_scoring_inputs

    folder = tmp_path_factory.mktemp("world-corpus")
    write_scoring_inputs(folder, split_scenes("heldout", 100), langs=("en",), size=64)
    candidates = json.loads((folder / "candidates_en.json").read_text())
    references = json.loads((folder / "references_en.json").read_text())
    ids = list(candidates)
    with open(folder / "manifest.jsonl", "w", encoding="utf-8") as handle:
        for model in ("good", "shifted"):
            for k, image_id in enumerate(ids):
                caption = candidates[image_id] if model == "good" else candidates[ids[(k + 1) % len(ids)]]
                handle.write(json.dumps({"id": image_id, "model": model, "image": f"images/{image_id}.png",
                                         "candidate": caption, "references": references[image_id]}) + "\n")
    return folder


def _score(manifest: Path, out: Path, engine: str = "local", **options):
    """One torch thread per scorer, as each Ray actor has (thread counts may change the last bits)."""
    return score_corpus(open_manifest(manifest), out, profile="world", metrics=METRICS, engine=engine,
                        batch_rows=BATCH, n_boot=200, threads=1, **options)


@pytest.fixture(scope="module")
def single_process(world_corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("single") / "out"
    report = _score(world_corpus / "manifest.jsonl", out)
    return out, report


def _files(out: Path) -> dict[str, bytes]:
    names = [p for p in sorted(out.rglob("*")) if p.is_file()]
    return {str(p.relative_to(out)): p.read_bytes() for p in names}


def test_single_process_run_scores_every_row_once(single_process):
    out, report = single_process
    assert (report.total_rows, report.scored_rows, report.errors) == (200, 200, 0)
    scores = read_scores(out)
    assert len(scores) == 200 * len(METRICS)
    assert not scores.duplicated(["model", "id", "metric"]).any()
    assert sorted(p.name for p in (out / "scores").iterdir()) == [f"part-{k:06d}.parquet" for k in range(10)]
    summary = report.summary.set_index(["model", "metric"])
    for metric in METRICS:  # the scene's own caption beats the next scene's under every metric
        good, shifted = summary.loc[("good", metric)], summary.loc[("shifted", metric)]
        assert good["n"] == shifted["n"] == 100
        assert good["ci_low"] < good["mean"] < good["ci_high"]
        assert good["mean"] > shifted["ci_high"]
    assert pd.read_csv(out / "summary.csv")["mean"].tolist() == pytest.approx(report.summary["mean"].tolist())


@pytest.mark.slow
def test_ray_with_two_actors_equals_single_process(single_process, world_corpus, tmp_path):
    pytest.importorskip("ray.data", reason="the ray engine needs Ray (pip install 'caplens[ray]')")
    reference, _ = single_process
    out = tmp_path / "ray"
    report = _score(world_corpus / "manifest.jsonl", out, engine="ray", actors=2)
    assert report.engine == "ray" and report.scored_rows == 200
    assert _files(out) == _files(reference)  # byte for byte: same batches, same scorer, same writer


@pytest.mark.slow
def test_ray_joins_a_started_cluster_by_its_address(single_process, world_corpus, tmp_path):
    """`ray start --head` turns Ray's token authentication on; a run given the cluster's
    HOST:PORT must still join it (Ray sends its token only to clusters it finds itself)."""
    pytest.importorskip("ray.data", reason="the ray engine needs Ray (pip install 'caplens[ray]')")
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ray_cli = str(Path(sys.executable).with_name("ray"))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}
    subprocess.run([ray_cli, "start", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                    "--disable-usage-stats"], check=True, capture_output=True, env=env, timeout=120)
    mode = os.environ.pop("RAY_AUTH_MODE", None)
    try:
        out = tmp_path / "joined"
        report = _score(world_corpus / "manifest.jsonl", out, engine="ray", ray_address=f"127.0.0.1:{port}")
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, env=env, timeout=120)
        if mode is not None:
            os.environ["RAY_AUTH_MODE"] = mode
    assert report.scored_rows == 200
    assert _files(out) == _files(single_process[0])


def test_ray_address_where_nothing_listens_fails_in_seconds(world_corpus, tmp_path):
    pytest.importorskip("ray.data", reason="the ray engine needs Ray (pip install 'caplens[ray]')")
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ValueError, match=rf"cannot join the Ray cluster at 127.0.0.1:{port}: nothing answers there"):
        _score(world_corpus / "manifest.jsonl", tmp_path / "out", engine="ray", ray_address=f"127.0.0.1:{port}")
    assert time.monotonic() - started < 30
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        _score(world_corpus / "manifest.jsonl", tmp_path / "out", engine="ray", ray_address="head-node")



def test_ray_address_check_takes_bracketed_ipv6():
    import socket

    from scoring.corpus.ray_engine import _check_reachable

    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this machine")
    try:
        listener = socket.create_server(("::1", 0), family=socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    with listener:
        port = listener.getsockname()[1]
        _check_reachable(f"[::1]:{port}")  # answers: no error
    with pytest.raises(ValueError, match=rf"at \[::1\]:{port}: nothing answers there"):
        _check_reachable(f"[::1]:{port}")


@pytest.mark.slow
def test_killed_run_resumes_to_identical_output(single_process, world_corpus, tmp_path):
    reference, _ = single_process
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "app.cli", "score-corpus", str(world_corpus / "manifest.jsonl"), "--out", str(out),
               "--engine", "local", "--profile", "world", "--metrics", ",".join(METRICS), "--batch-size", str(BATCH),
               "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if len(list((out / "scores").glob("part-*.parquet"))) >= 2:
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    written = len(list((out / "scores").glob("part-*.parquet")))
    assert 2 <= written < 10 and not (out / "summary.json").exists(), "the run was not killed midway"

    report = _score(world_corpus / "manifest.jsonl", out)
    assert report.skipped_rows == written * BATCH and report.scored_rows == 200 - written * BATCH
    files, expected = _files(out), _files(reference)
    assert files == expected
    assert not read_scores(out).duplicated(["model", "id", "metric"]).any()
    again = _score(world_corpus / "manifest.jsonl", out)
    assert again.scored_rows == 0 and _files(out) == expected


def test_a_row_whose_inputs_changed_is_scored_again_and_only_its_new_score_counts(world_corpus, tmp_path):
    """A row counted as done by (model, id, metric, version) kept its old score when its caption,
    references or image changed (an audit: `analyze reproduce` draws other references with
    another --seed into the same folder, and ROUGE-L stayed 1.0 where a fresh run gave 0.16). The
    input fingerprint makes such a row pending again, and only scores and errors of the inputs
    the latest run read count."""
    from scoring.corpus import current_scores, read_errors

    rows = [json.loads(line) for line in (world_corpus / "manifest.jsonl").read_text().splitlines()[:3]]
    for row in rows:
        row["image"] = str(world_corpus / row["image"])
    image = tmp_path / "scene.png"
    shutil.copy(rows[2]["image"], image)
    rows[2]["image"] = str(image)
    manifest, out = tmp_path / "m.jsonl", tmp_path / "out"

    def run(these):
        manifest.write_text("".join(json.dumps(r) + "\n" for r in these))
        report = score_corpus(open_manifest(manifest), out, profile="world", metrics=["RefCLIP-S"], engine="local",
                              n_boot=0)
        frame = current_scores(out)
        return report, dict(zip(frame["id"], frame["score"]))

    first, before = run(rows)
    assert first.scored_rows == 3
    changed = [dict(r) for r in rows]
    changed[0]["references"] = ["seven tiny violins on a submarine"]
    changed[1]["candidate"] = "a purple elephant juggles"
    second, after = run(changed)
    assert (second.scored_rows, second.skipped_rows) == (2, 1)
    assert len(after) == 3 and after[rows[2]["id"]] == before[rows[2]["id"]]
    for row in changed[:2]:  # scored now, as a fresh folder scores them
        assert after[row["id"]] != before[row["id"]]
    fresh_report = score_corpus(open_manifest(manifest), tmp_path / "fresh", profile="world", metrics=["RefCLIP-S"],
                                engine="local", n_boot=0)
    fresh = current_scores(tmp_path / "fresh")
    assert fresh_report.scored_rows == 3 and dict(zip(fresh["id"], fresh["score"])) == pytest.approx(after)
    assert len(read_scores(out)) == 5  # the old scores stay in the parts, out of the current ones
    # An image that failed is tried again once the file is fixed, and its error no longer counts.
    image.write_text("not an image any more")
    third, _ = run(changed)
    assert third.scored_rows == 1 and [e["id"] for e in read_errors(out)] == [rows[2]["id"]]
    shutil.copy(rows[1]["image"], image)
    fourth, last = run(changed)
    assert fourth.scored_rows == 1 and read_errors(out) == [] and len(last) == 3


@pytest.mark.java
def test_corpus_cider_equals_caplens_score(single_process, world_corpus, java, capsys):
    out, _ = single_process
    per_item = world_corpus / "per_item.json"
    code = main(["score", str(world_corpus / "candidates_en.json"), str(world_corpus / "images"), "--references",
                 str(world_corpus / "references_en.json"), "--profile", "world", "--metrics", "CIDEr",
                 "--out", str(per_item)])
    assert code == 0, capsys.readouterr().err
    expected = {k: v["CIDEr"] for k, v in json.loads(per_item.read_text())["items"].items()}
    scores = read_scores(out)
    corpus = scores[(scores["model"] == "good") & (scores["metric"] == "CIDEr")]
    # The `shifted` model's rows repeat the same images and references; document frequencies
    # count each (image, references) once, so the IDF is the one of the 100-image set.
    assert dict(zip(corpus["id"], corpus["score"])) == expected


def test_bad_rows_land_in_the_errors_file_and_the_run_goes_on(world_corpus, tmp_path, capsys):
    (tmp_path / "not-an-image.png").write_text("plain text")
    whole = (world_corpus / "images" / "world-1000001.png").read_bytes()
    (tmp_path / "truncated.png").write_bytes(whole[: len(whole) // 2])  # the header reads, the pixels do not
    good = {"model": "m", "image": str(world_corpus / "images" / "world-1000000.png"), "candidate": "a small blue square"}
    lines = [
        json.dumps({**good, "id": "ok-1"}),
        json.dumps({**good, "id": "empty", "candidate": "  "}),
        json.dumps({**good, "id": "text-file", "image": "not-an-image.png"}),
        json.dumps({**good, "id": "missing", "image": "nowhere.png"}),
        json.dumps({**good, "id": "ok-1", "candidate": "again"}),
        "{broken json",
        json.dumps({**good, "id": "no-image", "image": ""}),
        json.dumps({**good, "id": "ok-2"}),
        json.dumps({**good, "id": "by-url", "image": "file://" + good["image"]}),
        json.dumps({**good, "id": "truncated", "image": "truncated.png"}),
    ]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    code = main(["score-corpus", str(tmp_path / "bad.jsonl"), "--out", str(out), "--engine", "local",
                 "--profile", "world", "--metrics", "CLIP-S", "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0 and ("10 rows: 3 scored, 7 not scored (why: errors.jsonl); 10 of them handled by this run, "
                          "0 by an earlier one") in printed
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert [(e["row"], e["id"], e["reason"]) for e in errors] == [
        (2, "empty", "empty caption"),
        (3, "text-file", "not-an-image.png: not an image (or a format Pillow cannot read)."),
        (4, "missing", "image not found"),
        (5, "ok-1", "duplicate id 'ok-1' for model 'm'"),
        (6, "#6", "line 6 is not valid JSON (Expecting property name enclosed in double quotes)"),
        (7, "no-image", "no image given"),
        (10, "truncated", "truncated.png: the image is damaged or truncated (image file is truncated)."),
    ]
    scores = read_scores(out)
    assert sorted(scores["id"]) == ["by-url", "ok-1", "ok-2"] and scores["score"].nunique() == 1  # one image
    assert main(["score-corpus", str(tmp_path / "bad.jsonl"), "--out", str(out), "--engine", "local",
                 "--profile", "world", "--metrics", "CLIP-S", "--quiet"]) == 0
    assert ("10 rows: 3 scored, 7 not scored (why: errors.jsonl); 0 of them handled by this run, 10 by an earlier "
            "one") in capsys.readouterr().out


@pytest.mark.java
def test_rows_the_run_does_not_score_do_not_move_cider_of_the_others(world_corpus, tmp_path, java):
    """CIDEr-D's corpus document frequencies count only rows the run scores: the references of a
    row with an empty caption, a missing image or a file that is no image changed the CIDEr of
    every good row (a trial: 1.4364 became 1.0645)."""
    (tmp_path / "not-an-image.png").write_text("plain text")
    rows = [json.loads(line) for line in (world_corpus / "manifest.jsonl").read_text().splitlines()[:4]]
    for row in rows:
        row["image"] = str(world_corpus / row["image"])
    odd = ["a purple elephant juggles", "seven tiny violins", "a submarine under the desert"]
    broken = [{**rows[0], "id": "empty", "candidate": " ", "references": [odd[0]]},
              {**rows[0], "id": "missing", "image": "nowhere.png", "references": [odd[1]]},
              {**rows[0], "id": "text-file", "image": str(tmp_path / "not-an-image.png"), "references": [odd[2]]}]
    scores = {}
    for name, manifest in (("good", rows), ("mixed", rows[:2] + broken + rows[2:])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in manifest))
        score_corpus(open_manifest(tmp_path / f"{name}.jsonl"), tmp_path / name, profile="world", metrics=["CIDEr"],
                     engine="local", n_boot=0)
        frame = read_scores(tmp_path / name)
        scores[name] = dict(zip(frame["model"] + "/" + frame["id"], frame["score"]))
    assert len(scores["good"]) == 4 and scores["mixed"] == scores["good"]


def test_csv_parquet_and_coco_manifests_read_the_same_rows(world_corpus, tmp_path):
    rows = [json.loads(line) for line in (world_corpus / "manifest.jsonl").read_text().splitlines()[:3]]
    frame = pd.DataFrame(rows)
    frame.to_parquet(tmp_path / "m.parquet")
    frame.assign(references=frame["references"].map(json.dumps)).to_csv(tmp_path / "m.csv", index=False)
    jsonl = list(read_manifest(open_manifest(world_corpus / "manifest.jsonl")))[:3]
    for name in ("m.parquet", "m.csv"):
        assert list(read_manifest(open_manifest(tmp_path / name, image_root=world_corpus))) == jsonl
    blank_ids = frame.assign(id="", references=frame["references"].map(json.dumps))
    blank_ids.to_csv(tmp_path / "no-ids.csv", index=False)
    assert [r.id for r in read_manifest(open_manifest(tmp_path / "no-ids.csv", image_root=world_corpus))] == [
        "#1", "#2", "#3"]
    annotations = {"images": [{"id": r["id"], "file_name": r["image"]} for r in rows],
                   "annotations": [{"image_id": r["id"], "caption": c} for r in rows for c in r["references"]]}
    (tmp_path / "captions_val.json").write_text(json.dumps(annotations))
    (tmp_path / "good.json").write_text(json.dumps([{"image_id": r["id"], "caption": r["candidate"]} for r in rows]))
    coco = open_manifest(tmp_path / "good.json", coco_annotations=tmp_path / "captions_val.json", image_root=world_corpus)
    assert list(read_manifest(coco)) == jsonl
    with pytest.raises(ValueError, match="pass --coco-annotations"):
        open_manifest(tmp_path / "good.json")



def test_one_coco_captions_reader_for_corpus_manifests_and_score_rows(tmp_path):
    from scoring.corpus.manifest import read_score_rows

    results = tmp_path / "results.json"
    results.write_text(json.dumps([{"image_id": 7, "caption": "a red cube"}]))
    good = tmp_path / "captions.json"
    good.write_text(json.dumps({"images": [{"id": 7, "file_name": "seven.png"}],
                                "annotations": [{"image_id": 7, "caption": "a cube"}, {"image_id": 7, "caption": "red"}]}))
    row = read_score_rows([results, good])[0]
    corpus_row = next(iter(read_manifest(open_manifest(results, coco_annotations=good, image_root=tmp_path))))
    assert (row.image, row.references) == ("seven.png", ["a cube", "red"])
    assert (Path(corpus_row.image).name, corpus_row.references) == ("seven.png", ["a cube", "red"])
    bad = tmp_path / "bad_captions.json"
    bad.write_text(json.dumps({"images": [{"id": 7}], "annotations": []}))  # no file_name
    for read in (lambda: read_score_rows([results, bad]),
                 lambda: list(read_manifest(open_manifest(results, coco_annotations=bad, image_root=tmp_path)))):
        with pytest.raises(ValueError, match="bad_captions.json: a COCO image needs id and file_name"):
            read()


def test_a_metric_added_later_is_written_alone_and_unavailable_ones_do_not_keep_rows_pending(
        world_corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPLENS_REGISTRY_PACS_PATH", str(tmp_path / "no-pacs-here"))
    manifest = tmp_path / "small.jsonl"
    manifest.write_text("".join((world_corpus / "manifest.jsonl").read_text().splitlines(keepends=True)[:30]))
    out = tmp_path / "out"

    def run(metrics):
        return score_corpus(open_manifest(manifest, image_root=world_corpus), out, profile="world", metrics=metrics,
                            engine="local", batch_rows=BATCH, n_boot=0)

    first = run(["CLIP-S", "PAC-S"])  # PAC-S's checkpoint is pointed at a missing folder
    assert first.scored_rows == 30 and first.unavailable["PAC-S"].startswith("checkpoint not found")
    assert run(["CLIP-S", "PAC-S"]).scored_rows == 0  # the known-unavailable metric does not make rows pending
    added = run(["CLIP-S", "MCS", "PAC-S"])
    assert added.scored_rows == 30
    assert sorted(p.name for p in (out / "scores").iterdir()) == [
        "part-000000-1.parquet", "part-000000.parquet", "part-000001-1.parquet", "part-000001.parquet"]
    assert set(pd.read_parquet(out / "scores" / "part-000000-1.parquet")["metric"]) == {"MCS"}
    scores = read_scores(out)
    assert len(scores) == 60 and not scores.duplicated(["model", "id", "metric"]).any()
    assert list(added.summary["metric"]) == ["CLIP-S", "MCS"]


def test_a_score_missing_as_pandas_na_is_written_as_null():
    """Ray Data hands scores back as a nullable column: a row without references (BLEU-4 has no
    value) is pd.NA there, which ended the Ray run in "boolean value of NA is ambiguous"."""
    from scoring.corpus.run import SCORE_COLUMNS, _scores_table

    frame = pd.DataFrame({c: ["x", "y", "z"] for c in SCORE_COLUMNS})
    frame["score"] = pd.array([0.25, pd.NA, None], dtype="Float64")
    assert _scores_table(frame).column("score").to_pylist() == [0.25, None, None]
