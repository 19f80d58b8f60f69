"""Study tab (researcher or admin): a collection's guidelines (`annotation.studies.guidelines`), its
quality control (`annotation.studies.quality`: qualification round, gold items and attention checks,
flagged and paused annotators, reviewers), and its agreement dashboard, one call to
`annotation.studies.agreement.dashboard`; `caplens db agreement` and every ratings export give the same
numbers."""
from __future__ import annotations

import functools

import gradio as gr

from annotation.people.accounts import RESEARCH_ROLES
from annotation.studies.agreement import ANNOTATOR_HEADERS, dashboard
from annotation.errors import user_message
from annotation.studies.quality import (
    CHECK_HEADERS,
    PARTICIPANT_HEADERS,
    manage_annotator,
    mark_check_item,
    quality_view,
    save_quality,
    unmark_check_item,
)
from db.models import CHECK_KINDS
from annotation.studies.guidelines import study_guidelines, write_guidelines
from annotation.studies.tasks import RATING_FIELDS
from app import render
from app.login_notice import login_notice
from app.session import account_id, collection_row, follow_collections, forget_on_login_change

PURPOSE = ("**Study**: the collection's guidelines (Markdown), which annotators see before their first item and "
           "can open on every item; its quality control (a qualification round with feedback, gold items and attention "
           "checks mixed into the queue, flagged and paused annotators, reviewers who settle disagreements); and "
           "agreement: per annotator the items rated, median seconds per item, bias against the others, "
           "leave-one-out tau and gold accuracy; for the collection Krippendorff's alpha, ICC(2,k) and Fleiss' kappa with 95% "
           "bootstrap intervals over items. `caplens db agreement` and every ratings export give the same numbers.")


def build(user_state: gr.State, tab: gr.Tab) -> None:
    login_notice("agreement", PURPOSE, RESEARCH_ROLES, user_state)
    collection, refresh, field, run = collection_row(
        "agreement", "Show agreement", lambda: gr.Dropdown(list(RATING_FIELDS), value="overall", label="Rating field"))
    status = gr.Textbox(label="Status", interactive=False, elem_id="agreement-status")
    guidelines = gr.Textbox(label="Guidelines (Markdown; empty removes them)", lines=6, elem_id="study-guidelines")
    save_guidelines = gr.Button("Save guidelines", elem_id="study-guidelines-save")
    study = gr.Dataframe(headers=["measure", "value", "95% interval"], interactive=False, label="Whole collection",
                         elem_id="agreement-study")
    people = gr.Dataframe(headers=ANNOTATOR_HEADERS, interactive=False, label="Per annotator",
                          elem_id="agreement-annotators")

    def on_run(collection_name, chosen_field, request: gr.Request):
        try:
            report = dashboard(account_id(request), collection_name, chosen_field)
        except (PermissionError, ValueError, LookupError) as exc:
            return gr.skip(), gr.skip(), user_message(exc)
        return (report.summary_rows(), report.annotator_rows(),
                f"{report.n_ratings} ratings by {report.n_annotators} annotators; {report.n_items} items rated "
                f"at least twice; {report.bootstrap_samples} bootstrap samples.")

    follow_collections(user_state, refresh, collection, status, tab)
    run.click(on_run, [collection, field], [study, people, status], api_visibility="private")

    def on_guidelines(collection_name, markdown, request: gr.Request):
        try:
            return write_guidelines(account_id(request), collection_name, markdown)
        except (PermissionError, ValueError, LookupError) as exc:
            return user_message(exc)

    save_guidelines.click(on_guidelines, [collection, guidelines], status, api_visibility="private")

    def on_pick(collection_name, request: gr.Request):
        """The saved guidelines into the box, to edit rather than retype: saving an empty box removes them."""
        if not collection_name:
            return "", gr.skip()
        try:
            text = study_guidelines(account_id(request), collection_name).text
        except (PermissionError, ValueError, LookupError) as exc:
            return gr.skip(), user_message(exc)
        return text, (f"Guidelines of {collection_name} loaded below." if text else
                      f"{collection_name} has no guidelines yet; write them below.")

    # ----- quality control -------------------------------------------------------------
    with gr.Accordion("Quality control: qualification, gold items, reviewers", open=False, elem_id="qc-box"):
        gr.Markdown("Check items are captions of this collection with a known overall score: **qualification** "
                    "items come first to every annotator, with feedback after each; **gold** items and **attention** "
                    "checks (which tell the annotator what to answer) are mixed into the queue. Shares are 0–1; "
                    "leave the pass mark or the threshold empty for none.")
        with gr.Row():
            qc_pass = gr.Number(label="Qualification pass mark (share within tolerance)", elem_id="qc-pass")
            qc_rate = gr.Number(value=0, label="Share of items that are checks", elem_id="qc-rate")
            qc_threshold = gr.Number(label="Flag below gold accuracy", elem_id="qc-threshold")
            qc_min = gr.Number(value=3, precision=0, label="after this many checks", elem_id="qc-min")
            qc_pause = gr.Checkbox(label="Pause flagged annotators", elem_id="qc-pause")
            qc_save = gr.Button("Save quality control", elem_id="qc-save")
        with gr.Row():
            qc_caption = gr.Number(precision=0, label="Caption id", elem_id="qc-caption")
            qc_kind = gr.Dropdown(list(CHECK_KINDS), value="qualification", label="Kind", elem_id="qc-kind")
            qc_expected = gr.Number(label="Expected overall (0–1)", elem_id="qc-expected")
            qc_tolerance = gr.Number(value=0.1, label="Tolerance", elem_id="qc-tolerance")
        with gr.Row():
            qc_instruction = gr.Textbox(label="Instruction (attention checks: what to answer)",
                                        elem_id="qc-instruction")
            qc_explanation = gr.Textbox(label="Explanation shown after a qualification item",
                                        elem_id="qc-explanation")
            qc_add = gr.Button("Mark as check item", elem_id="qc-add")
            qc_remove = gr.Button("Unmark", elem_id="qc-remove")
        qc_items = gr.Dataframe(headers=CHECK_HEADERS, interactive=False, label="Check items", elem_id="qc-items")
        qc_people = gr.Dataframe(headers=PARTICIPANT_HEADERS, interactive=False, label="Annotators in the study",
                                 elem_id="qc-people")
        with gr.Row():
            qc_name = gr.Textbox(label="Account", elem_id="qc-name")
            qc_resume = gr.Button("Resume (end pause)", elem_id="qc-resume")
            qc_retry = gr.Button("Allow another qualification attempt", elem_id="qc-retry")
            qc_reviewer = gr.Button("Make reviewer", elem_id="qc-reviewer")
            qc_not_reviewer = gr.Button("No longer reviewer", elem_id="qc-not-reviewer")
        qc_reviewers = gr.Textbox(label="Reviewers of this study (researchers and admins review any)",
                                  interactive=False, elem_id="qc-reviewers")

    qc_outputs = [qc_pass, qc_rate, qc_threshold, qc_min, qc_pause, qc_items, qc_people, qc_reviewers, status]

    def shown(view):
        settings = view.settings
        return (settings["qualification_pass"], settings["check_rate"], settings["accuracy_threshold"],
                settings["min_checks"], settings["pause_flagged"], view.items, view.people,
                ", ".join(view.reviewers) or "none", view.message)

    def guarded(fn):
        """A handler whose refused request leaves the panel as it is and says why in the status."""
        @functools.wraps(fn)  # Gradio reads the signature to pass the gr.Request
        def wrapper(*args):
            try:
                return shown(fn(*args))
            except (PermissionError, ValueError, LookupError) as exc:
                return (*[gr.skip()] * (len(qc_outputs) - 1), user_message(exc))
        return wrapper

    def on_view(collection_name, request: gr.Request):
        return quality_view(account_id(request), collection_name)

    def on_save_qc(collection_name, pass_mark, rate, threshold, minimum, pause, request: gr.Request):
        return save_quality(account_id(request), collection_name, pass_mark, rate, threshold, minimum, pause)

    def on_add(collection_name, caption_id, kind, expected, tolerance, instruction, explanation, request: gr.Request):
        return mark_check_item(account_id(request), collection_name, caption_id, kind, expected, tolerance,
                               instruction, explanation)

    def on_remove(collection_name, caption_id, request: gr.Request):
        return unmark_check_item(account_id(request), collection_name, caption_id)

    def without_status(fn):
        """The panel refreshed beside another handler of the same click, which owns the status:
        both ran at once, and the quality view's empty message, landing last, blanked the agreement's."""
        panel = guarded(fn)

        @functools.wraps(fn)
        def wrapper(*args):
            return panel(*args)[:-1]
        return wrapper

    run.click(without_status(on_view), collection, qc_outputs[:-1], api_visibility="private")
    collection.change(guarded(on_view), collection, qc_outputs, api_visibility="private").then(
        on_pick, collection, [guidelines, status], api_visibility="private")
    forget_on_login_change(user_state, {
        guidelines: "", study: render.empty_table(["measure", "value", "95% interval"]),
        people: render.empty_table(ANNOTATOR_HEADERS), qc_items: render.empty_table(CHECK_HEADERS),
        qc_people: render.empty_table(PARTICIPANT_HEADERS), qc_reviewers: ""})
    qc_save.click(guarded(on_save_qc), [collection, qc_pass, qc_rate, qc_threshold, qc_min, qc_pause], qc_outputs,
                  api_visibility="private")
    qc_add.click(guarded(on_add), [collection, qc_caption, qc_kind, qc_expected, qc_tolerance, qc_instruction,
                                   qc_explanation], qc_outputs, api_visibility="private")
    qc_remove.click(guarded(on_remove), [collection, qc_caption], qc_outputs, api_visibility="private")
    for button, action in ((qc_resume, "resume"), (qc_retry, "retry"), (qc_reviewer, "reviewer"),
                           (qc_not_reviewer, "not-reviewer")):
        def on_manage(collection_name, name_, request: gr.Request, action=action):
            return manage_annotator(account_id(request), collection_name, name_, action)

        button.click(guarded(on_manage), [collection, qc_name], qc_outputs, api_visibility="private")
