# The app's modules import from this directory; pytester runs the plugin's contract tests.
pytest_plugins = ["pytester"]
