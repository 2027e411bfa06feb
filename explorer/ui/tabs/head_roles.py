"""Head roles: every head of the model scored for what it does (previous token, first token,
itself, induction, alignment); a click opens a head, and "test it" switches it off."""

from __future__ import annotations

import gradio as gr

from explorer.analysis import ablation
from explorer.errors import InputError
from explorer.present import insights, views
from explorer.present.tabs import DEFAULT_TAB
from explorer.present.views import ExplorerState
from explorer.ui.page import Page
from explorer.ui.render import tab_views
from explorer.ui.shown import Updates, shown_plot
from explorer.ui.tab import require, tab_event
from explorer.ui.tabs import switch_off
from explorer.ui.wiring import Wiring
from explorer.viz import role_at

HEAD_ROLES = """**What each head does**, measured, not assumed. A score is the average weight a head puts
where a role would: **P** previous token, **F** first token (an "attention sink" where a head
parks weight it does not need), **S** itself, **I** induction (on a random sequence repeated
twice: in the second copy, reading the token that followed the earlier occurrence, which is
how models copy from context), **A** alignment (cross-attention moving forward through the
source). A head is tagged when its best score passes the threshold (0.5; induction 0.4);
stronger colour, stronger evidence. Click a square to open that head (an alignment head on its cross-attention)."""

FIGURES = ("roles_image", "roles_info", "role_head_plot")


def layout(page: Page) -> None:
    with gr.Row(equal_height=False):
        with gr.Column(scale=2, min_width=280):
            # No label badge: it would cover the first layers and the head numbers.
            page.add(
                roles_image=gr.Image(
                    label="Every head, by role (click one to open it)", show_label=False, type="pil", format="png",
                    interactive=False, elem_id="head-roles", buttons=[],
                )
            )  # fmt: skip
        with gr.Column(scale=2, min_width=280):
            gr.Markdown(HEAD_ROLES, elem_classes="explain")
            page.add(roles_info=gr.Markdown(elem_id="roles-info"))
    page.add(
        test_head_button=gr.Button("Test it: switch the selected head off", elem_id="test-head"),
        role_head_plot=gr.Plot(label="The selected head", elem_id="role-head"),
    )


def figures(st: ExplorerState) -> Updates:
    try:
        return {
            "roles_image": insights.roles_image(st), "roles_info": insights.roles_summary(st),
            "role_head_plot": shown_plot(st, insights.role_head_figure(st), "head"),
        }  # fmt: skip
    except InputError as error:  # too few tokens yet: say so in place
        return {"roles_image": None, "roles_info": str(error), "role_head_plot": None}


def wire(wiring: Wiring) -> None:
    page, figures_shown = wiring.page, wiring.figures
    shown = [page.tabs, page.layer, page.head, *figures_shown]  # the head opens on its attention's tab
    page.roles_image.select(wiring.on(on_role_click), [page.state], shown, **wiring.quick)
    tested = [page.tabs, page.switched_off, *figures_shown]  # the result opens on the Switch heads off tab
    page.test_head_button.click(wiring.on(on_test_head), [page.state, page.ablation_method], tested)


@tab_event
def on_role_click(st, event: gr.SelectData):
    st = require(st)
    picked = role_at(*event.index[:2], st.session.config.n_layers, st.session.config.n_heads)
    if picked is None:
        return gr.skip()  # a click on a label or between squares
    st.layer, st.head = views.checked_view(st.session, picked[0], str(picked[1]))
    # The head opens where its role was measured (a click that left the page as it was looked broken):
    # its cross-attention for an alignment head, its self-attention for every other role.
    alignment = st.session.is_encoder_decoder and insights.head_roles(st).tag(*picked[:2]) == "alignment"
    st.tab = "cross" if alignment else DEFAULT_TAB
    return {
        "tabs": gr.Tabs(selected=st.tab), "layer": gr.Slider(value=st.layer), "head": gr.Dropdown(value=st.head),
        **tab_views(st),
    }  # fmt: skip


@tab_event
def on_test_head(st, method) -> Updates:
    """ "Test it": switch the selected head off, alone, and show what changed."""
    st = require(st)
    layer, head = switch_off.chosen_head(st)
    st.switched_off = ablation.SwitchedOff(frozenset({(layer, head)}), method=method)
    st.keep("ablation", ablation.ablate(st.session, st.switched_off))
    st.tab = switch_off.TAB_ID
    return {"tabs": gr.Tabs(selected=st.tab), "switched_off": st.switched_off.text(), **tab_views(st)}
