"""Chapter 9's attention explorer: the data the book's page draws (``pages``), beam search step by step
(``beam``), and the same views on a live model in JupyterLab (``live``)."""
