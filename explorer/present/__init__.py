"""What the explorer presents, without Gradio: the view tabs' registry (``tabs``), one browser
tab's choices (``views.ExplorerState``), the views and insights drawn from a session (``views``,
``insights``) and the models this process serves (``model_store``).

The page (``explorer.ui``) shows these; the notebook, the lessons and saved sessions use them
without it. Nothing here imports Gradio or the page (tests/test_import_contract.py).
"""
