"""The pages, one module for what each shows; each holds its view and the
queries only it makes (shared shaping lives in `captures/presenters.py`)."""
