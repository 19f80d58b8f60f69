"""Seeded scene graphs: the ground truth every caption, error and score of the world is checked against.

A scene is 1-6 objects (shape, colour, size, grid cell) on a coloured, patterned background.
(shape, colour) pairs are unique within a scene, so "the red circle" always names one object,
and objects sit in distinct cells of a 3x3 grid, so every pair has a well-defined relation.
"""
from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

SHAPES = ("circle", "square", "triangle", "star", "diamond", "cross")
COLOURS = ("red", "blue", "green", "yellow", "purple", "brown", "black", "white")
SIZES = ("small", "large")
BACKGROUNDS = ("grey", "light blue", "light green", "cream")
PATTERNS = ("plain", "stripes", "dots", "gradient")
# Relations between two objects, read "subject <relation> object".
RELATIONS = ("left of", "right of", "above", "below", "next to")
OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
GRID = 3  # 3x3 cells: (row, col), row 0 = top, col 0 = left

RGB = {
    "red": (220, 30, 35), "blue": (30, 70, 220), "green": (30, 160, 50),
    "yellow": (245, 210, 20), "purple": (140, 50, 170), "brown": (130, 80, 35),
    "black": (15, 15, 15), "white": (250, 250, 250),
}
BACKGROUND_RGB = {
    "grey": (150, 150, 150), "light blue": (170, 210, 240),
    "light green": (180, 230, 180), "cream": (245, 235, 200),
}


@dataclass(frozen=True)
class SceneObject:
    """One shape in a scene; `cell` is (row, col) in the 3x3 grid."""

    oid: int
    shape: str
    colour: str
    size: str
    cell: tuple[int, int]
    jitter: tuple[float, float] = (0.0, 0.0)  # sub-cell offset, rendering only


@dataclass(frozen=True)
class Scene:
    """A scene graph: objects, background and the seed that produced it."""

    seed: int
    objects: tuple[SceneObject, ...]
    background: str
    pattern: str
    relations: tuple[tuple[int, str, int], ...] = field(default=())

    @property
    def scene_id(self) -> str:
        return f"world-{self.seed:06d}"

    def obj(self, oid: int) -> SceneObject:
        return self.objects[oid]

    def relation(self, a: int, b: int) -> str:
        """The main spatial relation of object a to object b."""
        return spatial_relation(self.objects[a].cell, self.objects[b].cell)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["scene_id"] = self.scene_id
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "Scene":
        objects = tuple(
            SceneObject(o["oid"], o["shape"], o["colour"], o["size"], tuple(o["cell"]), tuple(o["jitter"]))
            for o in data["objects"]
        )
        relations = tuple((a, r, b) for a, r, b in data.get("relations", ()))
        return cls(data["seed"], objects, data["background"], data["pattern"], relations)


def spatial_relation(cell_a: tuple[int, int], cell_b: tuple[int, int]) -> str:
    """Relation of a to b from grid cells: the dominant axis decides; adjacent cells in a row are "next to"."""
    (ra, ca), (rb, cb) = cell_a, cell_b
    if ra == rb and abs(ca - cb) == 1:
        return "next to"
    if abs(ca - cb) >= abs(ra - rb):
        return "left of" if ca < cb else "right of"
    return "above" if ra < rb else "below"


def relation_holds(scene: Scene, a: int, relation: str, b: int) -> bool:
    """Whether "a <relation> b" is true in the scene (next to also holds for any horizontally adjacent pair)."""
    (ra, ca), (rb, cb) = scene.objects[a].cell, scene.objects[b].cell
    if relation == "left of":
        return ca < cb and abs(ca - cb) >= abs(ra - rb)
    if relation == "right of":
        return ca > cb and abs(ca - cb) >= abs(ra - rb)
    if relation == "above":
        return ra < rb and abs(ra - rb) > abs(ca - cb)
    if relation == "below":
        return ra > rb and abs(ra - rb) > abs(ca - cb)
    if relation == "next to":
        return max(abs(ra - rb), abs(ca - cb)) == 1
    raise ValueError(f"unknown relation {relation!r}; expected one of {RELATIONS}")


def generate_scene(seed: int, min_objects: int = 1, max_objects: int = 6) -> Scene:
    """The scene for `seed`: same seed, same scene, on every machine."""
    if not 1 <= min_objects <= max_objects <= GRID * GRID:
        raise ValueError(f"need 1 <= min_objects <= max_objects <= {GRID * GRID}")
    if seed < 0:  # random.Random seeds with |seed|: scene -s would be training scene s again
        raise ValueError(f"scene seeds are 0 or more (got {seed}): seed -s gives the same scene as s")
    rng = random.Random(seed)
    count = rng.randint(min_objects, max_objects)
    kinds = rng.sample([(s, c) for s in SHAPES for c in COLOURS], count)
    cells = rng.sample([(r, c) for r in range(GRID) for c in range(GRID)], count)
    background = rng.choice(BACKGROUNDS)
    objects = []
    for oid, ((shape, colour), cell) in enumerate(zip(kinds, cells)):
        jitter = (round(rng.uniform(-0.12, 0.12), 3), round(rng.uniform(-0.12, 0.12), 3))
        objects.append(SceneObject(oid, shape, colour, rng.choice(SIZES), cell, jitter))
    # Reading order (top-to-bottom, left-to-right) makes captions describe scenes predictably.
    objects.sort(key=lambda o: o.cell)
    objects = [SceneObject(i, o.shape, o.colour, o.size, o.cell, o.jitter) for i, o in enumerate(objects)]
    relations = tuple(
        (a, spatial_relation(objects[a].cell, objects[b].cell), b)
        for a in range(count) for b in range(count) if a != b
    )
    return Scene(seed, tuple(objects), background, rng.choice(PATTERNS), relations)


def generate_scenes(first_seed: int, count: int, **kwargs) -> list[Scene]:
    """`count` consecutive scenes; splits use disjoint seed ranges so held-out scenes are never trained on."""
    return [generate_scene(first_seed + i, **kwargs) for i in range(count)]
