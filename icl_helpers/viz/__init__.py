"""Presentation: figures and widgets. They receive study results and draw; they never run the model.

matplotlib, seaborn, ipywidgets and IPython.display are imported here and nowhere else.
"""
