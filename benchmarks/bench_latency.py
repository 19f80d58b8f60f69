"""Latency of the app's /score endpoint, measured the way a user feels it: through the API.

Starts the real app on a free localhost port and times, with gradio_client:
  cold  - the first request after start (backbones load lazily): 1 image x 5 captions;
  warm  - models loaded, a new image with 5 new captions (nothing cached);
  edit  - the same 5 captions again with one of them edited (the session remembers the
          other four; the scorer encodes only the edited caption).
Prints each figure (median of --repeats for warm and edit), the warm/edit ratio, and the
round trip of a near-empty request (/perturb) as the floor that no caching can remove.

    python benchmarks/bench_latency.py --profile tiny        # seconds to run
    python benchmarks/bench_latency.py --profile world       # the shipped offline models
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SUBJECTS = ["dog", "cat", "horse", "bird", "car", "man", "woman", "child", "boat", "bus"]
PLACES = ["on the grass", "in the street", "near the water", "under a tree", "in a kitchen", "on the beach"]
COLOURS = [(200, 40, 40), (40, 160, 60), (40, 60, 200), (220, 200, 40), (120, 40, 160), (30, 30, 30)]


def captions_for(round_number: int) -> list[str]:
    """Five captions no earlier round used (so warm rounds compute everything)."""
    return [f"a {SUBJECTS[(round_number + i) % len(SUBJECTS)]} {PLACES[(round_number * 5 + i) % len(PLACES)]} "
            f"number {round_number} {i}" for i in range(5)]


def write_image(folder: Path, round_number: int) -> Path:
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (320, 240), COLOURS[round_number % len(COLOURS)])
    ImageDraw.Draw(image).ellipse((40 + round_number * 7, 40, 200, 200), fill=(250, 250, 250))
    path = folder / f"bench-{round_number}.png"
    image.save(path)
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", default="tiny", help="metric profile (tiny, world, hub)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--metrics", default="", help="comma list (default: every metric of the profile)")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("CAPLENS_DATA_DIR", tempfile.mkdtemp(prefix="caplens-bench-"))
    from gradio_client import Client, handle_file

    from app.serve import create_app, launch_kwargs

    demo, ctx = create_app(args.profile, seed_demo=False)
    kwargs = launch_kwargs("127.0.0.1", free_port(), False)
    kwargs.update(prevent_thread_lock=True, quiet=True)
    demo.queue(default_concurrency_limit=2).launch(**kwargs)
    folder = Path(tempfile.mkdtemp(prefix="caplens-bench-images-"))
    references = "a picture of an animal outside\na photo of something on the ground"
    try:
        client = Client(demo.local_url, verbose=False)

        def request(image: Path, captions: list[str]) -> tuple[float, dict]:
            start = time.perf_counter()
            result = client.predict(handle_file(str(image)), "\n".join(captions), references, "en", args.metrics,
                                    api_name="/score")
            return time.perf_counter() - start, result

        cold, result = request(write_image(folder, 0), captions_for(0))
        metric_count = len(result["metrics"])
        unavailable = [m for m, info in result["metrics"].items() if info["status"].startswith("unavailable")]
        warm_times, edit_times, trip_times = [], [], []
        for round_number in range(1, args.repeats + 1):
            image, captions = write_image(folder, round_number), captions_for(round_number)
            seconds, result = request(image, captions)
            assert result["computed_now"] == 5, result["computed_now"]
            warm_times.append(seconds)
            edited = captions[:2] + [captions[2] + " and a ball"] + captions[3:]
            seconds, result = request(image, edited)
            assert result["computed_now"] == 1, result["computed_now"]
            edit_times.append(seconds)
            start = time.perf_counter()
            client.predict(captions[0], "masking", 0.4, 0, "en", "", api_name="/perturb")
            trip_times.append(time.perf_counter() - start)
    finally:
        demo.close()

    warm, edit = statistics.median(warm_times), statistics.median(edit_times)
    print(f"profile {ctx.profile}: {metric_count} metrics ({len(unavailable)} unavailable: {', '.join(unavailable) or '-'})")
    print("request -> all scores, 1 image x 5 captions, through the /score API (gradio_client, localhost)")
    print(f"cold (first request, models load): {cold:8.3f} s")
    print(f"warm (new image, 5 new captions):  {warm:8.3f} s   median of {len(warm_times)}: "
          + ", ".join(f"{t:.3f}" for t in warm_times))
    print(f"edit (1 of 5 captions changed):    {edit:8.3f} s   median of {len(edit_times)}: "
          + ", ".join(f"{t:.3f}" for t in edit_times))
    print(f"warm/edit ratio: {warm / edit:.1f}x")
    print(f"for scale, an API round trip doing almost nothing (/perturb masking): "
          f"{statistics.median(trip_times):.3f} s median")
    return 0


if __name__ == "__main__":
    sys.exit(main())
