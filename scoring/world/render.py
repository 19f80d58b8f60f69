"""Draw a scene graph with Pillow.

Rendering is deterministic for a scene (patterns and jitter come from the scene itself);
`variant` re-renders the same scene graph with a different jitter and pattern, which gives
PAC-S-style "generated" positive images of the same content.
"""
from __future__ import annotations

import math
import random

from PIL import Image, ImageDraw

from .scene import BACKGROUND_RGB, GRID, PATTERNS, RGB, Scene, SceneObject

SIZE_FRACTION = {"small": 0.5, "large": 0.85}  # of a grid cell


def _shade(rgb: tuple[int, int, int], delta: int) -> tuple[int, int, int]:
    return tuple(max(0, min(255, v + delta)) for v in rgb)


def _draw_background(draw: ImageDraw.ImageDraw, size: int, colour: str, pattern: str, rng: random.Random) -> None:
    base = BACKGROUND_RGB[colour]
    draw.rectangle([0, 0, size, size], fill=base)
    darker = _shade(base, -25)
    if pattern == "stripes":
        step = max(4, size // 12)
        for x in range(-size, size, step * 2):
            draw.polygon([(x, 0), (x + step, 0), (x + step + size, size), (x + size, size)], fill=darker)
    elif pattern == "dots":
        step = max(4, size // 10)
        radius = max(1, step // 6)
        for y in range(step // 2, size, step):
            for x in range(step // 2, size, step):
                draw.ellipse([x - radius, y - radius, x + radius, y + radius], fill=darker)
    elif pattern == "gradient":
        for y in range(size):
            draw.line([(0, y), (size, y)], fill=_shade(base, int(30 * y / size) - 15))


def _polygon_points(shape: str, cx: float, cy: float, r: float) -> list[tuple[float, float]]:
    if shape == "triangle":
        return [(cx, cy - r), (cx + r * 0.95, cy + r * 0.8), (cx - r * 0.95, cy + r * 0.8)]
    if shape == "diamond":
        return [(cx, cy - r), (cx + r * 0.7, cy), (cx, cy + r), (cx - r * 0.7, cy)]
    if shape == "star":
        points = []
        for k in range(10):
            radius = r if k % 2 == 0 else r * 0.42
            angle = -math.pi / 2 + k * math.pi / 5
            points.append((cx + radius * math.cos(angle), cy + radius * math.sin(angle)))
        return points
    if shape == "cross":
        w = r * 0.36
        return [(cx - w, cy - r), (cx + w, cy - r), (cx + w, cy - w), (cx + r, cy - w), (cx + r, cy + w),
                (cx + w, cy + w), (cx + w, cy + r), (cx - w, cy + r), (cx - w, cy + w), (cx - r, cy + w),
                (cx - r, cy - w), (cx - w, cy - w)]
    raise ValueError(f"no polygon for shape {shape!r}")


def _draw_object(draw: ImageDraw.ImageDraw, size: int, obj: SceneObject, jitter: tuple[float, float]) -> None:
    cell = size / GRID
    row, col = obj.cell
    cx = (col + 0.5 + jitter[0]) * cell
    cy = (row + 0.5 + jitter[1]) * cell
    r = SIZE_FRACTION[obj.size] * cell / 2
    fill = RGB[obj.colour]
    outline = _shade(fill, -60) if obj.colour != "black" else (70, 70, 70)
    if obj.shape == "circle":
        draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill, outline=outline)
    elif obj.shape == "square":
        s = r * 0.85
        draw.rectangle([cx - s, cy - s, cx + s, cy + s], fill=fill, outline=outline)
    else:
        draw.polygon(_polygon_points(obj.shape, cx, cy, r), fill=fill, outline=outline)


def render_scene(scene: Scene, size: int = 128, variant: int = 0) -> Image.Image:
    """RGB image of `scene`, `size` x `size` pixels, drawn at 4x and downsampled for smooth edges."""
    if size < 16:
        raise ValueError("image size must be at least 16 pixels")
    rng = random.Random(scene.seed * 1000 + variant)
    pattern = scene.pattern if variant == 0 else rng.choice(PATTERNS)
    big = size * 4
    image = Image.new("RGB", (big, big))
    draw = ImageDraw.Draw(image)
    _draw_background(draw, big, scene.background, pattern, rng)
    for obj in scene.objects:
        jitter = obj.jitter if variant == 0 else (rng.uniform(-0.12, 0.12), rng.uniform(-0.12, 0.12))
        _draw_object(draw, big, obj, jitter)
    return image.resize((size, size), Image.LANCZOS)
