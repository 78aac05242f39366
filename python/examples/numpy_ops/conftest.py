# lathe's pytest plugin: a test that takes `lathe_case` runs over lathe's fixtures pack.
pytest_plugins = ["lathe.pytest_plugin"]
