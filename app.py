"""Decoder Explorer: the Gradio app (also the Hugging Face Space entry point).

    python app.py            # http://127.0.0.1:7860, on the embedded SmolLM2-135M-Instruct

GRADIO_SERVER_NAME and GRADIO_SERVER_PORT choose where it listens, as on a Space.
"""

from explorer.ui.app import launch

if __name__ == "__main__":
    launch()
