"""The short explanations shown beside each view."""

LOADING = "**Loading the model…** Step and Generate come on when it is ready."

INTRO = """## Decoder Explorer
Press **Step** and watch a real transformer choose the next token. Keys: **s** Step,
**u** Undo, **←** **→** move the query."""

LESSONS = """Seven short lessons on the live model, from tokens to two architectures. Each step sets
up the model, the text and the view, says what to look at, and asks one question that the
explorer checks against the model."""

SELF_ATTENTION = """**Masked self-attention.** Row *i* is the token at position *i* asking "which
earlier tokens matter to me?"; each row's weights sum to 1. The hatched triangle is the
**causal mask**: before the softmax, the scores of later tokens are set to −∞, so they get
exactly zero weight. That is why generating one token at a time gives the same result as
training on the whole text at once. Click a token in the strip to outline its row."""

ALL_HEADS = """**Every head of this layer.** Heads in the same layer read different things:
some look at the previous token, some at the first token, some at matching words. Click a
head to open it above."""

CROSS_ATTENTION = """**Cross-attention** is how the decoder reads the source sentence. Queries
come from the target tokens written so far, keys and values from the encoder's output. Nothing
is masked: the whole source is known before the first target token is written. A row is the
step that writes the *next* token. Good translators show a rough diagonal, bending where the
word order differs: try "twenty-one", which German says units first ("ein" "und" "zwanzig"),
and see in layer 2 the row that writes "ein" read "one" and the row that writes "zwanzig" read
"twenty"; or a date, whose day moves before the month."""

ENCODER_ATTENTION = """**Encoder self-attention** runs once per source sentence and is not masked:
every source token may read every other, before and after it."""

EVERY_LAYER = """**One token through the whole stack.** Each row is a layer, each column a token
it can read; the colour is the head-averaged weight. Early layers often read nearby tokens,
later ones reach further back."""

KV_CACHE = """**Why the KV cache changes speed and not output.** A token's keys and values
depend only on it and the tokens before it (the mask sees to that), so they never change
once computed. With the cache on, a step computes them for the one new token and reuses the
rest: the work per step grows linearly with the length. With the cache off, every step
recomputes the whole sequence, so the time per step grows with the length too, and the total
quadratically. The memory cost is 2 (keys and values) × layers × key/value heads × head size ×
positions × 4 bytes. **Compare** reruns this generation both ways and checks the tokens."""

CANDIDATES = """The distribution the last token was chosen from (✓), most probable first.
Click another row to take that token instead: a branch. **Undo** goes back."""

LOGIT_LENS = """**The logit lens: why this token?** Every layer adds to one running vector per token
(the residual stream). Here that vector, after each layer, is put through the model's own
final norm and output head, as if the model stopped there. The top row is the real
prediction; going down shows the layers where it formed. Click a token in the strip to ask
what the model expected after it (✓ marks what did follow)."""

HEAD_ROLES = """**What each head does**, measured, not assumed. A score is the average weight a head puts
where a role would: **P** previous token, **F** first token (an "attention sink" where a head
parks weight it does not need), **S** itself, **I** induction (on a random sequence repeated
twice: in the second copy, reading the token that followed the earlier occurrence, which is
how models copy from context), **A** alignment (cross-attention moving forward through the
source). A head is tagged when its best score passes the threshold (0.5; induction 0.4);
stronger colour, stronger evidence. Click a square to open that head."""

SWITCH_OFF = """**Test a claim: switch heads off.** Attention shows where a head looks, not whether the
model needs it. Choose a layer and a head above and add it (or a whole layer's attention or
feed-forward), or type them: `17.3` is layer 17's head 3, `5.attention` and `5.mlp` are layer 5's
attention and feed-forward. **Run** reruns the tokens on screen with those switched off: **zero**
removes a head's output; **mean** replaces it at each position by its average over the text so
far, so the head still adds its usual amount but nothing about this token. The chart shows the
probability the model gave each token on screen, as it is and switched off; the dashed line is
the first generated token the changed model would not have chosen. Switched-off heads are
crossed out in red wherever heads are drawn. Your session is not changed."""

PATCHING = """**Find where the answer is carried: activation patching.** Two texts with the same number
of tokens that the model answers differently (swap a name, change a number) and two candidate
answers (blank: what each text would get next). The explorer runs the corrupted text again with
one piece of the clean run put in: the residual stream entering a layer at one position, or one
head's output. The colour is the share of the difference between the two answers that the piece
restores: **1** (blue) brings the clean answer back, **0** changes nothing, below 0 (red) pushes
the other way. For the translator the positions are the source sentence's, in the encoder, and
then (the third map) the target's, in the decoder: the same tokens in both runs, different only
by what cross-attention read."""

ATTRIBUTION = """**Why this token: attribution.** Which input tokens made the model give a token its score
(its logit, before the softmax)? Click a token in the strip, choose it or another candidate of
that step, and press **Explain it**. **Integrated gradients** moves every input token from a
baseline (the padding token; the first token and special tokens stay) to what it is, adds up how
the score changed on the way, and checks that the parts add up to the whole change
(*completeness*). **Input × gradient** is the one-step shortcut: how the score would move if a
token's vector shrank a little. Blue raises the score, orange lowers it. **Attention rollout**
(grey) only follows where attention flows, layer by layer: attention says where the model looked,
not what it needed. For the translator the inputs are the source words, shown beside where
cross-attention read them."""

COMPARE = """**Compare two runs.** Run A is the session on screen. Run B starts again from the same text
with one thing changed (the heads switched off in *Switch heads off*, another text, other
sampling settings, or the KV cache off) and generates as many tokens. Step by step: the two
runs' tokens, the probability each run gave the other's token, and the KL divergence between
their predictions (0: the same). Below, run A's attention minus run B's for the layer and head
chosen above (blue: A reads that key more). With the cache off, everything should agree."""

CAUSAL_PROOF = """**The causal proof, live.** Training feeds a whole text in one pass; generation feeds one
token at a time. They give the same numbers only because of the causal mask: position *i*
cannot read anything after *i*, so later tokens cannot change it. **Run the parallel check**
reruns the tokens on screen both ways and compares. The **sandbox** removes the mask for one
separate pass: the attention above the diagonal fills in and earlier predictions change."""

ARCHITECTURE = """**Where the arithmetic goes.** A multiply-add counts as two FLOPs. With the KV cache a
step computes one new row, so its cost grows slowly with the length (only the attention
scores grow); without it every row is computed again. The KV cache stores a key and a value
vector per layer, key/value head and position; grouped-query attention shares them among
query heads, which is how small models keep the cache small. A T5 model has no position
vectors at all: each head adds a learned amount to a score for each distance between query and
key, the same beyond a maximum distance (with a T5 model, a chart on this tab shows it).
The attention formula itself, as code: the first function of `explorer/model/attention.py`,
one line per step (scores, bias, mask, softmax, the weighted values)."""

SAVE_AND_SHARE = """Figures download from the camera button that appears when you hover over them.
A saved session (.npz) holds the input, settings, tokens and attention; open it to
continue where you were. A link reopens the same model, input, settings and step.
An exported web page opens in any browser, offline, with the tokens, each step's candidates and
the attention of every layer and head to explore; the JSON holds the same for other tools."""
