"""The Gradio front end: layout and callbacks (explorer/ui/app.py), views, shared models."""
