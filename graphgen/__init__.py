"""Graph generation from public biomedical sources: the source readers (:mod:`.sources`), the
recipes that turn them into edges (:mod:`.recipes`), the build (:mod:`.build`), the writers
(:mod:`.writers`, :mod:`.export`) and the reader of the written ``graph_files`` layout
(:mod:`.graph_files`). ``openbench generate`` runs :func:`graphgen.pipeline.generate`."""
