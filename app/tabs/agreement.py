"""Study tab (researcher or admin): a collection's guidelines (`annotation.studies`), and its
agreement dashboard, one call to `annotation.agreement.dashboard`; `caplens db agreement` and
every ratings export give the same numbers."""
from __future__ import annotations

import gradio as gr

from annotation.accounts import RESEARCH_ROLES
from annotation.agreement import ANNOTATOR_HEADERS, dashboard
from annotation.errors import user_message
from annotation.studies import write_guidelines
from annotation.tasks import RATING_FIELDS
from app.login_notice import login_notice
from app.session import account_id, collection_row, follow_collections

PURPOSE = ("**Study**: the collection's guidelines (Markdown), which annotators see before their first item and "
           "can open on every item; and agreement: per annotator the items rated, median seconds per item, bias against the others and "
           "leave-one-out tau; for the collection Krippendorff's alpha, ICC(2,k) and Fleiss' kappa with 95% "
           "bootstrap intervals over items. `caplens db agreement` and every ratings export give the same numbers.")


def build(user_state: gr.State) -> None:
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

    follow_collections(user_state, refresh, collection, status)
    run.click(on_run, [collection, field], [study, people, status], api_visibility="private")

    def on_guidelines(collection_name, markdown, request: gr.Request):
        try:
            return write_guidelines(account_id(request), collection_name, markdown)
        except (PermissionError, ValueError, LookupError) as exc:
            return user_message(exc)

    save_guidelines.click(on_guidelines, [collection, guidelines], status, api_visibility="private")
