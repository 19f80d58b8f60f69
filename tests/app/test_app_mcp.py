"""`caplens serve --mcp`: the API endpoints as MCP tools, listed and called over the MCP
protocol (streamable HTTP, the `mcp` client library) against a live local server, with the
same role checks as the API."""
from __future__ import annotations

import asyncio
import base64
import json
import warnings

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from app.api import ENDPOINTS
from app.session import TOKEN_HEADER
from tests.app.conftest import free_port, png_bytes


@pytest.fixture(scope="module")
def mcp_url(server):
    """A second app (the same code as `caplens serve --profile tiny --mcp`) over the data the
    session's server seeded."""
    from app.serve import create_app, launch, launch_kwargs

    demo, _ = create_app("tiny", seed_demo=False)
    kwargs = launch_kwargs("127.0.0.1", free_port(), False, mcp=True)
    kwargs.update(prevent_thread_lock=True, quiet=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        launch(demo, kwargs)
    assert not [w for w in caught if "gr.State input" in str(w.message)]
    yield demo.local_url.rstrip("/") + "/gradio_api/mcp/"
    demo.close()


def mcp(url: str, work, headers: dict | None = None):
    """Run `work(session)` in an initialised MCP client session."""
    async def main():
        async with httpx.AsyncClient(headers=headers or {}, timeout=120) as http:
            async with streamable_http_client(url, http_client=http) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await work(session)

    return asyncio.run(main())


def call(url: str, tool: str, arguments: dict, headers: dict | None = None):
    """(is_error, answer) of one tool call: the answer's value, read as JSON (a Python repr, with
    its single quotes and None, fails here), or the error's text."""
    result = mcp(url, lambda session: session.call_tool(tool, arguments), headers)
    text = result.content[0].text
    return result.isError, text if result.isError else json.loads(text)


def test_the_tools_are_the_api_endpoints_with_typed_documented_arguments(mcp_url):
    tools = {tool.name: tool for tool in mcp(mcp_url, lambda s: s.list_tools()).tools}
    assert set(tools) == set(ENDPOINTS)
    for tool in tools.values():  # every argument typed and described from the docstring's Args:
        assert tool.description
        for name, schema in tool.inputSchema["properties"].items():
            assert schema.get("type") or schema.get("anyOf") or schema.get("$ref"), (tool.name, name)
            assert schema.get("description"), (tool.name, name)
    perturb = tools["perturb"]
    assert perturb.description.startswith("Perturb a caption as PR-MCS / UMIC do")
    properties = perturb.inputSchema["properties"]
    assert set(properties) == {"text", "op", "p", "seed", "lang", "critical"}
    assert properties["text"]["type"] == "string" and properties["seed"]["type"] == "integer"
    assert properties["p"]["type"] == "number"
    assert "removal 0.6" in properties["p"]["description"]
    analyze = tools["analyze"]
    assert "researcher or admin session" in analyze.description
    assert set(analyze.inputSchema["properties"]) == {"collection", "metrics"}
    score = tools["score"].inputSchema
    assert set(score["properties"]) == {"image_path", "captions_text", "references_text", "lang_code", "metric_list"}
    assert "image_path" not in score.get("required", [])
    assert "data:image/png;base64" in score["properties"]["image_path"]["description"]
    rate = tools["rate"].inputSchema
    assert set(rate["required"]) == {"caption_id", "overall"}
    assert {"type": "null"} in rate["properties"]["fluency"]["anyOf"]


def test_score_without_an_image_gives_the_text_metrics_and_with_one_the_image_metrics(server, mcp_url):
    from scoring.api import ScoreItem, get_scorer

    captions, refs = ["a red square", "a blue circle"], ["a red square on white"]
    scorer = get_scorer(server.ctx.profile)
    direct = scorer.score([ScoreItem(image=None, candidate=c, references=refs, lang="en") for c in captions],
                          metrics=["BLEU-1"])
    failed, answer = call(mcp_url, "score", {"captions_text": "\n".join(captions), "references_text": "\n".join(refs),
                                             "lang_code": "en", "metric_list": "BLEU-1,CLIP-S"})
    assert not failed, answer
    assert [row["caption"] for row in answer["rows"]] == captions
    assert [row["BLEU-1"] for row in answer["rows"]] == [round(v, 4) for v in direct["BLEU-1"].values]
    assert answer["rows"][0]["BLEU-1"] > answer["rows"][1]["BLEU-1"]
    assert answer["rows"][0]["CLIP-S"] is None  # no image: the image metric has nothing to score

    image = "data:image/png;base64," + base64.b64encode(png_bytes()).decode()
    failed, answer = call(mcp_url, "score", {"image_path": image, "captions_text": "a red square",
                                             "metric_list": "CLIP-S", "lang_code": "en"})
    assert not failed, answer
    assert isinstance(answer["rows"][0]["CLIP-S"], float)
    assert answer["metrics"]["CLIP-S"]["status"].startswith("available")

    failed, answer = call(mcp_url, "score", {"image_path": "/etc/passwd", "captions_text": "a red square"})
    assert failed and "url" in answer
    failed, answer = call(mcp_url, "score", {"metric_list": "BLEU-1"})
    assert failed and "give at least one caption" in answer


def test_rate_with_aspects_null_or_left_out(server, mcp_url):
    failed, answer = call(mcp_url, "login", {"name": server.annotator[0], "password": server.annotator[1]})
    annotator = {TOKEN_HEADER: answer["token"]}
    for aspects in ({"fluency": None, "relevance": None, "descriptiveness": None}, {}):
        failed, item = call(mcp_url, "next_item", {"collection": server.collection}, annotator)
        assert not failed and item["caption_id"] is not None, item
        failed, rating = call(mcp_url, "rate", {"caption_id": item["caption_id"], "overall": 0.75, **aspects},
                              annotator)
        assert not failed, rating
        assert rating["overall"] == 0.75 and rating["fluency"] is None and rating["descriptiveness"] is None
    failed, rating = call(mcp_url, "rate", {"caption_id": item["caption_id"], "overall": 0.5, "fluency": 0.25},
                          annotator)
    assert not failed and rating["fluency"] == 0.25, rating


def test_calling_perturb_returns_the_library_result_with_its_default_p(mcp_url):
    from scoring.perturb.ops import perturb

    text = "a man in a white shirt rides a brown horse on the beach"
    failed, answer = call(mcp_url, "perturb", {"text": text, "op": "removal", "seed": 3, "lang": "en"})
    assert not failed, answer
    (result,) = answer
    expected = perturb(text, "removal", seed=3, lang="en")
    assert result["p"] == 0.6 and result["text"] == expected.text
    failed, answer = call(mcp_url, "perturb", {"text": text, "op": "permutation", "seed": 3, "lang": "en"})
    assert answer[0]["op"] == "jumble"


def test_analysis_tools_need_a_researcher_session(server, mcp_url):
    arguments = {"collection": server.collection, "metrics": "BLEU-1"}
    failed, answer = call(mcp_url, "analyze", arguments)
    # An agent is told how to log in through MCP, not to use a browser tab.
    assert failed and "call the login tool" in answer and "X-CapLens-Token header of your MCP connection" in answer
    assert "Annotate tab" not in answer
    failed, answer = call(mcp_url, "analyze", arguments, {TOKEN_HEADER: "no-such-token"})
    assert failed and "expired or was ended" in answer and "call the login tool" in answer
    failed, answer = call(mcp_url, "login", {"name": server.annotator[0], "password": server.annotator[1]})
    annotator = {TOKEN_HEADER: answer["token"]}
    failed, answer = call(mcp_url, "analyze", arguments, annotator)
    assert failed and "researcher" in answer.lower()
    failed, answer = call(mcp_url, "login", {"name": server.researcher[0], "password": server.researcher[1]})
    researcher = {TOKEN_HEADER: answer["token"]}
    failed, answer = call(mcp_url, "analyze", arguments, researcher)
    assert not failed, answer
    report = answer
    # Three seeded captions and four perturbations of one, plus any a test beside it saved to the
    # session's shared collection (under pytest-xdist other modules may have run first).
    assert report["summary"].startswith(f"{_non_reference_captions(server.collection)} captions, 3 with human ratings")
    assert {row["metric"] for row in report["robustness"]} == {"BLEU-1"}
    failed, answer = call(mcp_url, "failure_cases", {**arguments, "mode": "unmoved", "limit": 3}, researcher)
    assert not failed, answer
    changes = [abs(row["change %"]) for row in answer]
    assert len(changes) == 3 and changes == sorted(changes)


def _non_reference_captions(name: str) -> int:
    from sqlalchemy import select

    from annotation.database import database_session
    from db.models import Caption, Collection

    with database_session() as session:
        collection = session.scalars(select(Collection).where(Collection.name == name)).one()
        count = sum(caption.kind != "reference" for caption in collection.captions)
    assert count >= 7
    return count


def test_without_mcp_there_is_no_mcp_server():
    from app.serve import launch_kwargs

    assert launch_kwargs("127.0.0.1", 0, False)["mcp_server"] is False
    assert launch_kwargs("127.0.0.1", 0, False, mcp=True)["mcp_server"] is True


def test_serve_mcp_without_the_mcp_package_is_a_one_line_error(monkeypatch, capsys):
    import importlib.util

    from app.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a))
    assert main(["serve", "--mcp", "--port", "0"]) == 2
    assert 'needs the mcp package: pip install "gradio[mcp]"' in capsys.readouterr().err


def test_tool_answers_are_json_text(server, mcp_url):
    result = mcp(mcp_url, lambda session: session.call_tool("score", {"captions_text": "a red square",
                                                                      "metric_list": "BLEU-1,CLIP-S"}))
    text = result.content[0].text
    answer = json.loads(text)
    assert answer["rows"][0]["CLIP-S"] is None and '"CLIP-S": null' in text and "None" not in text
    assert text.startswith('{"rows": [{"#": 1,')


def test_the_mcp_option_names_every_tool_it_serves():
    import argparse

    from app.serve import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(), [])
    serve = parser._subparsers._group_actions[0].choices["serve"]
    text = next(a.help for a in serve._actions if "--mcp" in a.option_strings)
    listed = text[text.index("(") + 1:text.index(")")].split(", ")
    assert listed == list(ENDPOINTS)
