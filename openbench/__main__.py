"""``python -m openbench``: the ``openbench`` command (:func:`openbench.entry.main`)."""
try:
    from openbench.entry import main
except KeyboardInterrupt:  # a Ctrl-C before the entry point's handler is installed: nothing ran yet
    import os

    os.write(2, b"error: interrupted\n")
    os._exit(130)

if __name__ == "__main__":
    main()
