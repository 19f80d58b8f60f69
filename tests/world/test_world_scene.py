"""Scene generation and rendering are reproducible from a seed and respect the world's rules."""
import hashlib

import pytest

from scoring.world.render import render_scene
from scoring.world.scene import Scene, generate_scene, generate_scenes, relation_holds


def _digest(image) -> str:
    return hashlib.sha256(image.tobytes()).hexdigest()


def test_same_seed_same_scene_and_pixels():
    for seed in (0, 7, 123456):
        assert generate_scene(seed) == generate_scene(seed)
        assert _digest(render_scene(generate_scene(seed), 96)) == _digest(render_scene(generate_scene(seed), 96))


def test_different_seeds_differ():
    scenes = generate_scenes(0, 50)
    assert len({(s.objects, s.background) for s in scenes}) == 50
    assert len({_digest(render_scene(s, 48)) for s in scenes[:20]}) == 20


def test_scene_rules_hold_for_many_seeds():
    counts = set()
    for scene in generate_scenes(1000, 400):
        n = len(scene.objects)
        counts.add(n)
        assert 1 <= n <= 6
        assert len({(o.shape, o.colour) for o in scene.objects}) == n  # "the red circle" names one object
        assert len({o.cell for o in scene.objects}) == n
        assert [o.oid for o in scene.objects] == list(range(n))
        for a, relation, b in scene.relations:
            assert relation_holds(scene, a, relation, b)
    assert counts == {1, 2, 3, 4, 5, 6}


def test_scene_round_trips_through_dict():
    scene = generate_scene(42)
    assert Scene.from_dict(scene.to_dict()) == scene


def test_variant_render_changes_pixels_not_content():
    scene = generate_scene(5)
    assert _digest(render_scene(scene, 64, variant=1)) != _digest(render_scene(scene, 64))


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="need 1 <= min_objects <= max_objects <= 9"):
        generate_scene(0, min_objects=0)
    with pytest.raises(ValueError, match="image size must be at least 16 pixels"):
        render_scene(generate_scene(0), size=8)


def _claims_hold(scene, description) -> bool:
    """Whether a short description's every claim is true of `scene`, finding each object by its
    (unique) shape and colour rather than by the description's object ids."""
    from scoring.world.scene import relation_holds

    found = {}
    for i, m in enumerate(description.mentions):
        match = [o for o in scene.objects if (o.shape, o.colour) == (m.shape, m.colour)]
        if not match or match[0].size != m.size:
            return False
        found[i] = match[0].oid
    return all(relation_holds(scene, found[a], relation, found[b]) for a, relation, b in description.relations)


def test_a_counterfactual_twin_changes_one_stated_fact_so_each_caption_is_true_of_its_own_image_only():
    import random
    from collections import Counter

    from scoring.world.captions import counterfactual_twin, describe_short, realise
    from scoring.world.scene import generate_scene

    kinds = Counter()
    for seed in range(300):
        scene = generate_scene(seed)
        rng = random.Random(seed)
        description = describe_short(scene, rng)
        twin = counterfactual_twin(scene, description, rng)
        if twin is None:
            continue
        edit, changed, twin_description = twin
        kinds[edit.split(":")[0]] += 1
        assert realise(twin_description, "en").text != realise(description, "en").text
        assert _claims_hold(scene, description) and _claims_hold(changed, twin_description)
        assert not _claims_hold(changed, description) and not _claims_hold(scene, twin_description)
        assert changed.seed == scene.seed and changed.background == scene.background
        assert [o.cell for o in changed.objects] == [o.cell for o in scene.objects]
        assert len({(o.shape, o.colour) for o in changed.objects}) == len(changed.objects)
        differ = [(a, b) for a, b in zip(scene.objects, changed.objects) if a != b]
        if edit.startswith("shape"):
            assert len(differ) == 1 and differ[0][0].shape != differ[0][1].shape
            assert (differ[0][0].colour, differ[0][0].size) == (differ[0][1].colour, differ[0][1].size)
        else:
            (a, a2), (b, b2) = differ
            assert (a2.shape, a2.colour, a2.size, b2.shape, b2.colour, b2.size) == \
                (b.shape, b.colour, b.size, a.shape, a.colour, a.size)
    assert kinds["shape"] > 150 and kinds["places"] > 15


def test_no_twin_when_no_edit_can_change_the_caption():
    import random

    from scoring.world.captions import counterfactual_twin, describe_short
    from scoring.world.captions import describe_long
    from scoring.world.scene import SHAPES, SceneObject

    objects = tuple(SceneObject(i, shape, "red", "small", (i // 3, i % 3)) for i, shape in enumerate(SHAPES))
    scene = Scene(7, objects, "grey", "plain")
    description = describe_short(scene, random.Random(0), objects=1)
    assert counterfactual_twin(scene, description, random.Random(0)) is None
    with pytest.raises(ValueError, match="short description"):
        counterfactual_twin(scene, describe_long(scene), random.Random(0))


def test_places_share_decides_how_often_a_two_object_caption_gets_the_places_edit():
    import random

    from scoring.world.captions import counterfactual_twin, describe_short
    from scoring.world.scene import generate_scene

    drawn = {None: [], 1.0: [], 0.0: []}
    for seed in range(400):
        scene = generate_scene(seed)
        if len(scene.objects) < 2:
            continue
        description = describe_short(scene, random.Random(seed), objects=2)
        a, b = (m.oid for m in description.mentions)
        if scene.relation(a, b) == scene.relation(b, a):
            continue
        for share in drawn:
            twin = counterfactual_twin(scene, description, random.Random(seed), share)
            drawn[share].append(twin[0].startswith("places"))
    assert len(drawn[1.0]) > 100 and all(drawn[1.0]) and not any(drawn[0.0])
    assert 0.2 < sum(drawn[None]) / len(drawn[None]) < 0.5  # one of up to three edits
