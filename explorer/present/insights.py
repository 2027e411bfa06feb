"""The views of the logit lens, head roles, causal proof and architecture tabs."""

from __future__ import annotations

import numpy as np
import torch

from explorer.analysis import ablation, cost, lens, proof, roles
from explorer.present.views import MEAN, ExplorerState, head_label, pick_head
from explorer.tokens import visible
from explorer.viz import attention_heatmap, logit_lens_heatmap, role_grid
from explorer.viz.ablation import ablation_chart
from explorer.viz.heatmap import window_note
from explorer.viz.labels import position_labels
from explorer.viz.patching import patching_heatmap
from explorer.viz.position_bias import position_bias_chart


# ---------------------------------------------------------------- logit lens
def lens_figure(state: ExplorerState):
    session = state.session
    position = state.query_position()
    result = lens.logit_lens(session, position=position)
    token = visible(session.token_texts()[position])
    followed = [[t == result.next_token_id for t in row.token_ids] for row in result.rows]
    what = "next" if result.next_token_id is None else "after it (✓ = what followed)"
    return logit_lens_heatmap(
        [r.label for r in result.rows], [r.texts for r in result.rows],
        np.array([r.probabilities for r in result.rows]),
        title=f"After {position} {token!r}: each layer's top tokens {what}", followed=followed,
    )  # fmt: skip


# ---------------------------------------------------------------- head roles
def head_roles(state: ExplorerState) -> roles.HeadRoles:
    kept = state.result("roles")
    if kept is None:
        kept = roles.head_roles(state.session)
        state.keep("roles", kept)
    return kept


def selected_head(state: ExplorerState) -> tuple[int, int] | None:
    return None if state.head == MEAN else (state.layer, int(state.head))


def roles_image(state: ExplorerState):
    result = head_roles(state)
    strength = np.zeros_like(result.entropy)
    for i, row in enumerate(result.tags):
        for h, tag in enumerate(row):
            if tag:
                strength[i, h] = result.scores[tag][i, h]
    return role_grid(result.tags, strength, selected_head(state), switched_off=state.switched_off.heads)


def roles_summary(state: ExplorerState) -> str:
    result = head_roles(state)
    counts: dict[str, int] = {}
    for row in result.tags:
        for tag in row:
            counts[tag] = counts.get(tag, 0) + 1
    n = sum(counts.values())
    found = ", ".join(f"**{tag}** {counts[tag]}" for tag in roles.THRESHOLDS if counts.get(tag))
    lines = [
        f"Of {n} heads: {found or 'none with a clear role'}; {counts.get('', 0)} without a clear role "
        f"(scored on {result.rows} query rows of this text; induction on a repeated random sequence)."
    ]
    chosen = selected_head(state)
    if chosen is not None:
        layer, head = chosen
        tag = result.tag(layer, head) or "no clear role"
        lines.append(f"\n\n**Selected: {result.summary(layer, head)}** → {tag}.")
    return "".join(lines)


def role_head_figure(state: ExplorerState):
    """The selected head, opened from the overview, in the attention its tag was measured on:
    cross-attention for an alignment head, self-attention for every other role."""
    session = state.session
    tokens = session.token_texts()
    chosen = selected_head(state)
    if session.is_encoder_decoder and chosen is not None and head_roles(state).tag(*chosen) == "alignment":
        return attention_heatmap(
            pick_head(session.cross_attention(state.layer), state.head), tokens, session.source_texts(),
            causal=False, selected_query=state.query_position(), key_title="source tokens (encoder output)",
            query_title="target tokens (decoder)",
            title=f"Cross-attention (where alignment is measured), layer {state.layer}, {head_label(state.head)}",
        )  # fmt: skip
    what = "Decoder self-attention" if session.is_encoder_decoder else "Causal self-attention"
    window = session.config.window_of(state.layer)
    return attention_heatmap(
        pick_head(session.self_attention(state.layer), state.head), tokens, tokens, causal=True, window=window,
        title=f"{what}, layer {state.layer}, {head_label(state.head)}{window_note(window, len(tokens))}",
        selected_query=state.query_position(),
    )  # fmt: skip


# ---------------------------------------------------------------- switching heads off
def ablation_result(state: ExplorerState) -> ablation.AblationResult | None:
    """The last run, while it covers the tokens on screen and the choice in the box."""
    result = state.result("ablation")
    return result if result is not None and result.switched_off == state.switched_off else None


def ablation_summary(state: ExplorerState) -> str:
    chosen = state.switched_off
    result = ablation_result(state)
    if not chosen:
        return "Nothing is switched off yet: add a head or a sublayer, or type one (`17.3`, `5.mlp`)."
    if result is None:
        return (
            f"Switched off ({chosen.method}): **{chosen.describe()}**. Press **Run with these switched off** to "
            f"rerun the {len(state.session.token_ids)} tokens on screen without them."
        )
    tokens = state.session.token_texts()
    lines = [
        f"With **{chosen.describe()}** switched off ({chosen.method}), the tokens on screen had a mean probability "
        f"of **{result.before.mean():.2f}** as the model is and **{result.after.mean():.2f}** switched off."
    ]
    first = result.prompt_length
    if first >= len(result.token_ids):
        lines.append("No token has been generated yet: step to see where the greedy choice would depart.")
    elif result.departs_at is None:
        lines.append(f"Every one of the {len(result.token_ids) - first} generated tokens is still the greedy choice.")
    else:
        p = result.departs_at
        now = state.session.tokenizer.decode([result.chosen_after[p - 1]])
        forced = any(step.forced and step.position == p for step in state.session.steps)
        on_screen = f"you chose {visible(tokens[p])!r}" if forced else f"the model chose {visible(tokens[p])!r}"
        lines.append(
            f"The greedy choice first departs at position {p}: {on_screen}, switched off the model would choose "
            f"{visible(now)!r} ({len(result.departures)} of {len(result.token_ids) - first} generated tokens differ)."
        )
    return " ".join(lines)


def ablation_figure(state: ExplorerState):
    result = ablation_result(state)
    if result is None:
        return None
    chosen = state.switched_off
    return ablation_chart(
        state.session.token_texts(), result.before.tolist(), result.after.tolist(),
        title=f"Each token's probability, with {chosen.describe()} switched off ({chosen.method})",
        first_generated=result.prompt_length, departs_at=result.departs_at,
    )  # fmt: skip


# ---------------------------------------------------------------- activation patching
def patching_summary(state: ExplorerState) -> str:
    result = state.patching
    if result is None:
        return "Press **Run the patching sweep** to patch the clean run into the corrupted one, layer by layer."
    best_layer, best_position = np.unravel_index(np.argmax(result.residual), result.residual.shape)
    top_layer, top_head = np.unravel_index(np.argmax(result.heads), result.heads.shape)
    where = "source token" if result.stack == "encoder" else "token"
    return (
        f"Logit difference {result.answer!r} − {result.other!r}: **{result.clean_difference:.2f}** in the clean run, "
        f"**{result.corrupted_difference:.2f}** in the corrupted one. The residual stream restores the most entering "
        f"layer {best_layer} at {where} {best_position} {visible(result.positions[best_position])!r} "
        f"({result.residual[best_layer, best_position]:.2f}); of the heads, layer {top_layer} head {top_head} "
        f"({result.heads[top_layer, top_head]:.2f})."
    )


def patching_figures(state: ExplorerState) -> tuple[dict | None, dict | None, dict | None]:
    """The residual stream (layers x positions), the heads, and a translator's decoder positions."""
    result = state.patching
    if result is None:
        return None, None, None
    where = "source position (encoder)" if result.stack == "encoder" else "position"
    residual = patching_heatmap(
        result.residual, position_labels(result.positions), column_title=where,
        title="Share restored, patching the residual stream entering each layer at one position",
    )  # fmt: skip
    heads = patching_heatmap(
        result.heads, [f"head {h}" for h in range(result.heads.shape[1])], column_title="head",
        title="Share restored, patching one head's output at every position",
    )  # fmt: skip
    decoder = None
    if result.decoder_residual is not None:
        decoder = patching_heatmap(
            result.decoder_residual, position_labels(result.decoder_positions),
            column_title="target position (decoder)",
            title="Share restored, patching the decoder's residual entering each layer at one target position",
        )  # fmt: skip
    return residual, heads, decoder


# ---------------------------------------------------------------- causal proof
def parallel_summary(state: ExplorerState) -> str:
    check = state.result("parallel")
    n = len(state.session.token_ids)
    if check is None:
        return (
            f"Press **Run the parallel check** to compare one parallel pass over the {n} tokens on screen "
            "with the step-by-step run."
        )
    verdict = "✓ **One parallel pass gives what the step-by-step run gave.**" if check.same_predictions else (
        "✗ **The parallel pass and the step-by-step run disagree on a prediction.**"
    )  # fmt: skip
    return (
        f"{verdict} Over all {check.positions} positions: largest logit difference "
        f"**{check.max_logit_difference:.1e}** (the logits reach {check.largest_logit:.1f}); largest difference "
        f"from the attention on screen **{check.max_attention_difference:.1e}** (computed from the queries and "
        "keys the steps kept); "
        f"the most probable next token is {'the same at every position' if check.same_predictions else 'not the same'}."
    )


def sandbox_figure(state: ExplorerState):
    sandbox = state.result("sandbox")
    if sandbox is None:
        return None
    if sandbox.layer != state.layer:  # another layer chosen: one more mask-free pass keeps that one
        sandbox = proof.unmasked_pass(state.session, state.layer)
        state.keep("sandbox", sandbox)
    tokens = state.session.token_texts()
    return attention_heatmap(
        pick_head(sandbox.attention, state.head), tokens, tokens, causal=False,
        title=f"Without the mask (sandbox): layer {state.layer}, {head_label(state.head)}",
    )  # fmt: skip


def sandbox_summary(state: ExplorerState) -> str:
    sandbox: proof.Sandbox | None = state.result("sandbox")
    if sandbox is None:
        return "Press **Remove the mask for one pass** to see what the mask prevents. Your session is not changed."
    session = state.session
    texts = session.token_texts()
    n = len(texts)
    lines = [
        f"**Without the mask, {sandbox.future_weight:.0%} of an average row's weight falls on later tokens** "
        f"(above the diagonal), and the logits move by up to {sandbox.max_logit_difference:.1f}. "
        f"The most probable next token changed at **{len(sandbox.changed)} of {n}** positions (the last one "
        "too, though it could already see everything: in later layers it reads the earlier positions, which "
        "have changed):"
    ]
    tokenizer = session.tokenizer
    for position, masked, free in sandbox.changed[:8]:
        before, after = (visible(tokenizer.decode([t])) for t in (masked, free))
        lines.append(f"\n- after {position} {visible(texts[position])!r}: {before!r} with the mask, {after!r} without")
    if len(sandbox.changed) > 8:
        lines.append(f"\n- … and {len(sandbox.changed) - 8} more")
    lines.append(
        "\n\nA model trained with the mask never learned to use the future, so without it its predictions "
        "are simply wrong; a model trained without it would copy the answer. This pass was separate: "
        "the session, its cache and its attention are unchanged."
    )
    return "".join(lines)


# ---------------------------------------------------------------- architecture and cost
def position_bias_figure(state: ExplorerState):
    """T5's learned relative position bias per head against distance, for the encoder and the
    decoder (None for a model without relative positions)."""
    model, config = state.session.model, state.session.config
    if config.positions != "relative":
        return None
    reach = config.relative_max_distance * 3 // 2  # a little past where the buckets stop growing
    stacks = {}
    with torch.no_grad():
        for name, stack, distances in (
            ("encoder", getattr(model, "encoder", None), torch.arange(-reach, reach + 1)),
            ("decoder", model.decoder, torch.arange(-reach, 1)),
        ):
            if stack is not None and stack.relative is not None:
                stacks[name] = (distances.numpy(), stack.relative.by_distance(distances).float().numpy())
    head = None if state.head == MEAN else int(state.head)
    return position_bias_chart(stacks, head, config.relative_max_distance)


def architecture_table(state: ExplorerState) -> str:
    session = state.session
    rows = cost.architecture_rows(session.config, cost.parameter_count(session.model))
    return "| property | value |\n|---|---|\n" + "\n".join(f"| {name} | {value} |" for name, value in rows)


def cost_table(state: ExplorerState) -> str:
    session = state.session
    c = session.config
    n = len(session.token_ids)
    source = len(session.source_ids) if session.is_encoder_decoder else 0
    last = session.steps[-1] if session.steps else None
    use_cache = last.use_cache if last is not None else session.use_cache
    flops = cost.step_flops(c, n, use_cache, source)
    parts = [
        ("attention: q, k, v, output projections", flops.attention_projections),
        ("attention: scores and weighted values", flops.attention_scores),
        ("feed-forward", flops.feed_forward),
        ("output head (vocabulary logits)", flops.output_head),
    ]
    what = "one new position" if use_cache else f"all {n} positions again"
    lines = [f"**The last step's arithmetic** (cache {'on' if use_cache else 'off'}: {what}, over {n} keys)", "",
             "| part | MFLOPs | share |", "|---|---:|---:|"]  # fmt: skip
    lines += [f"| {name} | {value / 1e6:,.1f} | {value / flops.total:.0%} |" for name, value in parts]
    lines.append(f"| **total** | **{flops.total / 1e6:,.1f}** | |")
    if last is not None:
        lines.append(f"\nMeasured: {last.elapsed_ms:.0f} ms for this step.")
    dtype_bytes = next(session.model.parameters()).element_size()
    formula = cost.kv_cache_bytes(c, n, dtype_bytes, source)
    text = (
        f"\n**KV cache** = 2 × {c.n_layers} layers × {c.n_kv_heads} key/value heads × {c.head_dim} dims × "
        f"{n} positions × {dtype_bytes} bytes"
    )
    if source:
        text += f" + the same for the {source} source positions"
    text += f" = **{formula / 1e6:.3f} MB**; "
    if c.sliding_window and n > c.sliding_window:
        text += (
            f"its sliding layers keep every position here (a cache bounded to their window would keep "
            f"{c.sliding_window} of them); "
        )
    if session.cache is None:
        text += "the cache is off now, so nothing is held."
    else:
        measured = session.cache_bytes
        mark = "✓" if measured == formula else "✗"
        text += f"measured in the session's cache: **{measured / 1e6:.3f} MB** {mark}."
    lines.append(text)
    return "\n".join(lines)
