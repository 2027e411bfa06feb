"""Decoder Explorer: the Gradio app (also the Hugging Face Space entry point).

    python app.py            # http://127.0.0.1:7860, on the embedded SmolLM2-135M-Instruct
    python app.py --help     # the options (model, text, host, port, share, allowed folders, models offered, ...)

GRADIO_SERVER_NAME and GRADIO_SERVER_PORT choose where it listens, as on a Space.
"""

from explorer.cli import main

if __name__ == "__main__":
    main()
