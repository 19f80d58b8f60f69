"""Live-use latency: 1 image x 5 captions, the embedding metrics, cold, warm and edit.

In process (the library call the app makes) and, where gradio is installed, through the
app's /score HTTP API (gradio_client on localhost), the way a user feels it:
  cold  - the first request after start (backbones load lazily);
  warm  - models loaded, a new image (640x480 JPEG) with 5 new captions (nothing cached);
  edit  - the same image and captions with one caption edited (only that caption is new).
Warm and edit are medians of --repeats rounds. In process it also prints where one warm
round's time goes (stages, from a run with a device sync at every stage boundary) and the
warm time of each metric scored alone.

    python benchmarks/bench_latency.py --profile bench              # hub-sized, random weights
    python benchmarks/bench_latency.py --profile world --api        # also through the HTTP API
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_clipscore import write_jpegs  # noqa: E402

SUBJECTS = ["dog", "cat", "horse", "bird", "car", "man", "woman", "child", "boat", "bus"]
PLACES = ["on the grass", "in the street", "near the water", "under a tree", "in a kitchen", "on the beach"]
REFERENCES = ["a picture of an animal outside", "a photo of something on the ground"]
EMBEDDING_FAMILIES = ("clip-s", "refclip-s", "mcs", "specs", "itm")


def captions_for(round_number: int) -> list[str]:
    """Five captions no earlier round used (so warm rounds compute everything)."""
    return [f"a {SUBJECTS[(round_number + i) % len(SUBJECTS)]} {PLACES[(round_number * 5 + i) % len(PLACES)]} "
            f"number {round_number} {i}" for i in range(5)]


def edited(captions: list[str]) -> list[str]:
    return captions[:2] + [captions[2] + " and a ball"] + captions[3:]


def embedding_metrics(profile: str) -> list[str]:
    from scoring.registry import load_registry

    return [name for name, spec in load_registry(profile).metrics.items() if spec.family in EMBEDDING_FAMILIES]


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def in_process(profile: str, metrics: list[str], repeats: int, folder: Path, profile_top: int = 0) -> None:
    from scoring import stages
    from scoring.api import ScoreItem, Scorer
    from scoring.backbones import BackboneUnavailable

    warmups = 3  # rounds after the cold one, not timed: the GPU leaves its idle clocks
    rounds = 2 * repeats + len(metrics) + 2 + warmups
    images = write_jpegs(folder, rounds)

    def request(scorer, round_number: int, captions: list[str], names=metrics) -> float:
        items = [ScoreItem(images[round_number], c, REFERENCES) for c in captions]
        _sync()
        start = time.perf_counter()
        results = scorer.score(items, names)
        _sync()
        seconds = time.perf_counter() - start
        missing = [n for n, r in results.items() if r.available and None in r.values]
        assert not missing, missing
        return seconds, results

    start = time.perf_counter()
    scorer = Scorer(profile)
    construct = time.perf_counter() - start
    cold, results = request(scorer, 0, captions_for(0))
    unavailable = [n for n, r in results.items() if not r.available]
    for number in range(rounds - warmups, rounds):
        request(scorer, number, captions_for(number))
    warm_times, edit_times = [], []
    for number in range(1, repeats + 1):
        captions = captions_for(number)
        warm_times.append(request(scorer, number, captions)[0])
        edit_times.append(request(scorer, number, edited(captions))[0])
    number = repeats + 1
    with stages.recording(sync=True) as times:
        synced, _ = request(scorer, number, captions_for(number))
    alone = {}
    for offset, name in enumerate(metrics):
        number = repeats + 2 + offset
        alone[name] = request(scorer, number, captions_for(number), [name])[0]
    if profile_top:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.runcall(request, scorer, repeats, edited(edited(captions_for(repeats))))

    warm, edit = statistics.median(warm_times), statistics.median(edit_times)
    precisions = set()
    for backbone in scorer.registry.backbones:
        try:
            placement = getattr(scorer.backbone(backbone), "placement", None)  # a CapLens-R head has none
        except BackboneUnavailable:
            continue
        if placement is not None:
            precisions.add(placement.label)
    print(f"profile {scorer.profile} on {', '.join(sorted(precisions))} (preprocess {scorer.images.mode}): "
          f"{len(metrics)} embedding metrics ({len(unavailable)} unavailable: {', '.join(unavailable) or '-'})")
    print("in process, Scorer.score(), 1 image (640x480 JPEG path) x 5 captions + 2 references")
    print(f"cold (first request, models load): {cold * 1000:8.1f} ms  (+ {construct * 1000:.0f} ms Scorer construction)")
    print(f"warm (new image, 5 new captions):  {warm * 1000:8.1f} ms   median of {len(warm_times)}: "
          + ", ".join(f"{t * 1000:.1f}" for t in warm_times))
    print(f"edit (1 of 5 captions changed):    {edit * 1000:8.1f} ms   median of {len(edit_times)}: "
          + ", ".join(f"{t * 1000:.1f}" for t in edit_times))
    total = sum(times.values())
    print(f"warm round with a sync per stage ({synced * 1000:.1f} ms): " + ", ".join(
        f"{k} {1000 * v:.1f}" for k, v in times.items()) + f", rest {1000 * max(0.0, synced - total):.1f} ms")
    print("each metric alone, warm (new image and captions): " + ", ".join(
        f"{name} {1000 * seconds:.1f}" for name, seconds in alone.items()) + " ms")
    graphed = [getattr(backbone, kind) for backbone in scorer._backbones.values()
               for kind in ("text_graph", "image_graph", "pair_graph") if hasattr(backbone, kind)]
    if any(g.enabled for g in graphed):
        print(f"CUDA graphs: {sum(g.captured for g in graphed)} captured over {len(graphed)} tower forwards; "
              + ("eager after a failed capture: " + "; ".join(f"{g.name}: {g.failure}" for g in graphed if g.failure)
                 if any(g.failure for g in graphed) else "no capture failed"))
    else:
        print("CUDA graphs: off")
    if profile_top:
        print("an edit round under cProfile, by own time:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(profile_top)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def through_api(profile: str, metrics: list[str], repeats: int, folder: Path) -> None:
    """The same rounds through the app's /score HTTP API (the app's own session cache answers
    the edit round's four unchanged captions), two ways: gradio_client (queued: join, then an
    event stream) and one plain HTTP POST to /gradio_api/run/score beside the queue (the image
    uploaded once, a session hash kept across calls, as docs/api.md shows). A near-empty round
    trip (/perturb masking) measures each route's own cost."""
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    import httpx
    from gradio_client import Client, handle_file

    from app.serve import create_app, launch, launch_kwargs

    images = write_jpegs(folder / "api", 2 * repeats + 2)
    demo, ctx = create_app(profile, seed_demo=False)
    kwargs = launch_kwargs("127.0.0.1", free_port(), False)
    kwargs.update(prevent_thread_lock=True, quiet=True)
    launch(demo, kwargs)  # as `caplens serve` does: its queue, then the warm-up
    perturb_args = ["a red car on the road", "masking", 0.4, 0, "en", ""]
    try:
        client = Client(demo.local_url, verbose=False)
        http = httpx.Client(base_url=demo.local_url, timeout=120)

        def by_client(number: int, captions: list[str]) -> tuple[float, dict]:
            start = time.perf_counter()
            result = client.predict(handle_file(str(images[number])), "\n".join(captions), "\n".join(REFERENCES), "en",
                                    ",".join(metrics), api_name="/score")
            return time.perf_counter() - start, result

        uploaded: dict[int, dict] = {}

        def direct(number: int, captions: list[str]) -> tuple[float, dict]:
            if number not in uploaded:  # a client uploads an image once and scores its edits
                path = http.post("gradio_api/upload", files=[("files", ("photo.jpg", images[number].read_bytes(),
                                                                       "image/jpeg"))]).json()[0]
                uploaded[number] = {"path": path, "meta": {"_type": "gradio.FileData"}}
            body = {"data": [uploaded[number], "\n".join(captions), "\n".join(REFERENCES), "en", ",".join(metrics), None],
                    "session_hash": "bench-latency"}
            start = time.perf_counter()
            answer = http.post("gradio_api/run/score", json=body)
            seconds = time.perf_counter() - start
            assert answer.status_code == 200, answer.text[:300]
            return seconds, answer.json()["data"][0]

        def rounds(call, offset: int) -> tuple[float, list[float], list[float]]:
            cold, _ = call(offset, captions_for(100 + offset))
            warm_times, edit_times = [], []
            for number in range(offset + 1, offset + repeats + 1):
                captions = captions_for(100 + number)
                seconds, result = call(number, captions)
                assert result["computed_now"] == 5, result["computed_now"]
                warm_times.append(seconds)
                seconds, result = call(number, edited(captions))
                assert result["computed_now"] == 1, result["computed_now"]
                edit_times.append(seconds)
            return cold, warm_times, edit_times

        def trips(call) -> list[float]:
            times = []
            for _ in range(max(repeats, 10)):
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            return times

        client_rounds = rounds(by_client, 0)
        direct_rounds = rounds(direct, repeats + 1)
        client_trip = trips(lambda: client.predict(*perturb_args, api_name="/perturb"))
        queued_trip = trips(lambda: http.get(
            f"gradio_api/call/perturb/{http.post('gradio_api/call/perturb', json={'data': perturb_args}).json()['event_id']}"))
        direct_trip = trips(lambda: http.post("gradio_api/run/perturb",
                                              json={"data": perturb_args, "session_hash": "bench-latency"}).json())
    finally:
        demo.close()
    ms = lambda times: f"{statistics.median(times) * 1000:.1f} ms"  # noqa: E731
    print(f"through the /score HTTP API (localhost), profile {ctx.profile}, medians of {repeats}:")
    for label, (cold, warm_times, edit_times) in (("gradio_client (queued)", client_rounds),
                                                    ("direct POST /gradio_api/run/score", direct_rounds)):
        print(f"  {label:36s} cold {cold * 1000:.1f} ms; warm {ms(warm_times)}, edit {ms(edit_times)}")
    print(f"a near-empty round trip (/perturb masking), medians of {len(direct_trip)}: gradio_client {ms(client_trip)}, "
          f"queued HTTP (join + event stream) {ms(queued_trip)}, direct POST {ms(direct_trip)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="tiny", help="metric profile (tiny, world, bench, hub)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--metrics", default="", help="comma list (default: the profile's embedding metrics)")
    parser.add_argument("--api", action="store_true", help="also through the HTTP API (needs gradio)")
    parser.add_argument("--cprofile", type=int, default=0, help="print this many top functions of a profiled edit round")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("CAPLENS_DATA_DIR", tempfile.mkdtemp(prefix="caplens-bench-"))
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] or embedding_metrics(args.profile)
    folder = Path(tempfile.mkdtemp(prefix="caplens-bench-images-"))
    in_process(args.profile, metrics, args.repeats, folder, args.cprofile)
    if args.api:
        try:
            import gradio  # noqa: F401
        except ImportError:
            print("through the HTTP API: not measured (gradio is not installed here)")
        else:
            through_api(args.profile, metrics, args.repeats, folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
