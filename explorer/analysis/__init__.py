"""What the explorer computes about a session beyond its own steps: the logit lens, the
causal proof and its mask-free sandbox, head roles, architecture and cost, and saved or
shared sessions. Nothing here knows about Gradio."""
