"""The Gradio front end: the page's frame (layout.py, app.py, wiring.py), every view tab and panel
one feature (feature.py, features.py: one module per view tab in tabs/, per panel in panels/), the
events (events.py, lifecycle.py, the panels' lesson_events.py and workshop_*.py). What a view
shows is explorer.present's. docs/architecture.md walks through a Step."""
