"""The base layer's input and output discipline: every file openbench reads goes through
:mod:`.inputs` (errors name the file and line), every file or folder it writes through
:mod:`.outputs` (atomic, only replacing what openbench wrote, modes from the umask)."""
from openbench._io.inputs import (iter_lines, iter_raw_lines, line_of_row, load_npy, load_npz, open_binary,
                                  parse_json, read_json, read_table, read_text)
from openbench._io.outputs import (JSON_SIGNATURE, MARKER, OutputRefused, SequentialWriter, atomic_path,
                                   check_output_file, check_output_folder, is_openbench_folder, is_openbench_json,
                                   is_openbench_png, replace_folder,
                                   write_array_atomic, finite, json_text, visible, strict_json, write_json, write_marker,
                                   write_text_atomic)

__all__ = ["iter_lines", "iter_raw_lines", "line_of_row", "load_npy", "load_npz", "open_binary", "parse_json",
           "read_json", "read_table", "read_text", "JSON_SIGNATURE", "MARKER", "OutputRefused", "SequentialWriter",
           "atomic_path", "check_output_file", "check_output_folder", "is_openbench_folder", "is_openbench_json",
           "is_openbench_png", "replace_folder",
           "write_array_atomic", "finite", "json_text", "visible", "strict_json", "write_json", "write_marker", "write_text_atomic"]
