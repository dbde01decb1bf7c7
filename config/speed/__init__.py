"""Speed tricks that override framework internals, one module each.

Each module's docstring names the upstream code it mirrors (file, function, version) and the
figure it serves; tests/config/test_speed_mirrors.py pins that code, so an upgrade that changes it
fails a test instead of production. Each was kept after an interleaved A/B against the code
without it (issue 14: a trick worth less than 15 % on its figure is removed).
"""
