"""The Gradio front end: the page's frame (layout.py), one module per view tab (tabs/), the events
(events.py, lifecycle.py, lesson_events.py, wired in app.py), what a view shows (views.py,
insights.py), shared models (model_store.py). docs/architecture.md walks through a Step."""
