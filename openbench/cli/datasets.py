"""``openbench datasets`` (the registry) and ``openbench export-kgid``."""
from __future__ import annotations


import click

from openbench._io.outputs import strict_json
from openbench.cli.common import WholeHelpGroup, handle_errors

__all__ = ["datasets", "datasets_list", "datasets_get", "export_kgid"]


@click.group(cls=WholeHelpGroup, short_help="Published datasets by name: list, download, verify, convert.")
@click.option("--registry", "registry_files", multiple=True, type=click.Path(dir_okay=False),
              help="A registry file of your own (a JSON list of entries: name, format, license, and url + sha256 "
                   "or files [{url, sha256}]; optionally size, version, description, family, citation, counts), "
                   "added to the built-in one; also $OPENBENCH_REGISTRY (os.pathsep-separated).")
@handle_errors
def datasets(registry_files):
    """The registry of published datasets (OpenBioLink2020, OBL2021, Hetionet, PrimeKG, DRKG, ogbl-biokg, BioKG,
    PharmKG-8k, and your own): list and fetch by name."""
    from openbench.datasets.published.registries import use_registry_files

    use_registry_files(registry_files)
    click.get_current_context().call_on_close(lambda: use_registry_files(()))


@datasets.command("list")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@handle_errors
def datasets_list(fmt):
    """Print the registry: name, version, URL, checksum, counts, protocol."""
    from openbench.datasets.published.registries import registry, registry_table

    if fmt == "json":
        click.echo(strict_json([entry.as_row() for entry in registry().values()], indent=2))
    else:
        click.echo(registry_table())


@datasets.command("get")
@click.argument("name")
@click.option("--root", type=click.Path(file_okay=False), default=None,
              help="Where datasets live [default: $OPENBENCH_DATA_DIR or the user data directory].")
@click.option("--mirror", default=None, help="Base URL serving the dataset's files (by file name) instead of their "
                                           "publisher; file:///FOLDER reads them from a local folder.")
@click.option("--force", is_flag=True, help="Download again over a copy that fails verification (kept until the new "
                                            "one is verified).")
@click.option("--file", "files", multiple=True, type=click.Path(dir_okay=False, exists=True),
              help="A copy of the dataset's file you already have (e.g. PrimeKG's kg.csv), verified against the "
                   "catalogue's checksum and converted instead of downloaded (repeatable: files matched by name).")
@click.option("--progress/--no-progress", default=True, show_default=True)
@handle_errors
def datasets_get(name, root, mirror, force, files, progress):
    """Download (resumable), verify and unpack NAME (a published KG: convert it once, into graph/ for
    split rand --dataset NAME); a verified copy is reused. Prints its folder. The only command that
    downloads: the others, given a name that is not here yet, say to run this one."""
    from openbench.datasets.published.fetch import get

    click.echo(str(get(name, root, mirror=mirror, force=force, progress=progress, files=files, download=True)))


@click.command("export-kgid")
@click.option("--dataset", "dataset_path", required=True, type=click.Path(file_okay=False),
              help="A split folder or a registry name.")
@click.option("--output", "output_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for entities.tsv, relations.tsv, train.tsv, valid.tsv and test.tsv.")
@handle_errors
def export_kgid(dataset_path, output_dir):
    """Write a dataset in the integer-id layout (OBL2021's KGID)."""
    from openbench.datasets.loader import export_id_layout

    counts = export_id_layout(dataset_path, output_dir)
    click.echo(f"wrote {counts['entities']} entities, {counts['relations']} relations and "
               f"{counts['train']}/{counts['valid']}/{counts['test']} train/valid/test triples to {output_dir}")

