"""Writers of the built graph: OpenBioLink's TSV layout (BEL and RDF follow in their issue)."""
