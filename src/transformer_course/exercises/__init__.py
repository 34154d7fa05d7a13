"""The course's exercises, one module per chapter (``ch05`` for chapter 5): what each exercise asks, its cases, its
reference (the chapter's module), its known mistakes and hints, and, for an experiment, the judge that measures an
answer. This is course content: a chapter's author edits it here. How a submission is run safely and compared is the
grading machinery (``transformer_course.grading``), which finds the chapters here (``registry.CHAPTER_MODULES``): a
module ``chNN.py`` registers chapter NN's exercises by existing, and names the notebook that holds them
(``NOTEBOOK``).
"""
