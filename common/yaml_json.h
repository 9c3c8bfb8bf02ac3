/* YAML (and therefore JSON) -> jansson, with the line of every node.
 *
 * One parser serves job files, sweep files and JSON files (JSON is YAML).
 * Values follow the YAML 1.2 core schema for plain (unquoted) scalars:
 *   null, Null, NULL, ~, (empty)     -> null
 *   true/True/TRUE, false/...        -> true / false
 *   [-+]?[0-9]+, 0o17, 0x1F          -> integer (must fit in 64 bits)
 *   1.5, -.5, 1e-3, 2.5E+4           -> real
 *   anything else                    -> string
 * Quoted and block scalars are always strings.  Mappings become objects
 * (keys must be scalars, no duplicates), sequences become arrays.  Anchors,
 * aliases, explicit tags and multi-document streams are refused.
 *
 * Line table: `lines` is an object mapping the JSON pointer (RFC 6901) of
 * every node to the 1-based line where it starts: "" is the root,
 * "/base/steps" a member, "/grid/rope/1" an array element.  For a mapping
 * member the line is that of its key. */
#ifndef BF_YAML_JSON_H
#define BF_YAML_JSON_H

#include <stddef.h>
#include <jansson.h>

#include "bf_error.h"

/* Parses `len` bytes of `text`.  `file` names the source in messages (may be
 * NULL).  Returns a new reference (json null for an empty document), or NULL
 * with `err` set (file, line, and field = dotted path of the node when the
 * problem is inside one).  If `lines` is not NULL, *lines receives a new
 * object (the line table above) on success and NULL on failure. */
json_t *bf_yaml_parse(const char *text, size_t len, const char *file,
                      json_t **lines, bf_error *err);

/* Reads and parses a whole file.  Errors (including I/O) name the path. */
json_t *bf_yaml_parse_file(const char *path, json_t **lines, bf_error *err);

/* Line of the node at `pointer` ("/grid/rope/1"), 0 when unknown or when
 * lines is NULL. */
int bf_yaml_line(const json_t *lines, const char *pointer);

/* The line table of the subtree at `prefix` ("/base"), re-rooted: entries
 * "/base/x..." become "/x...", "/base" becomes "".  New reference; an empty
 * object when nothing lies under prefix.  Lets a caller hand the lines of a
 * nested mapping to bf_job_config_apply_json. */
json_t *bf_yaml_lines_subtree(const json_t *lines, const char *prefix);

#endif
