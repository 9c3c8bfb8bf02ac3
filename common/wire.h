/* wire: the Bifocal wire protocol's framing, shared by the coordinator
 * (bifocald), the client (bifocal) and the workers.
 *
 * A frame is one JSON object on one line: compact JSON followed by '\n'
 * (JSON never needs a raw newline, so the newline is an unambiguous end).
 * Every message has a string "type"; docs/protocol.md lists them all.
 * A frame longer than the reader's limit (BF_WIRE_MAX_FRAME by default) is
 * refused: the peer gets an error and the connection is closed, so a reader
 * never needs to resynchronise in the middle of a stream.
 *
 * This file is pure byte handling (bf_frame_reader, bf_wire_parse,
 * bf_wire_encode), used on whatever chunks a socket delivers: by the daemon's
 * libuv loop, the worker's libuv link and the client's blocking connection
 * (results/rpc.h). */
#ifndef BF_WIRE_H
#define BF_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "bf_error.h"

#define BF_WIRE_VERSION 1
#define BF_WIRE_MAX_FRAME ((size_t)16 << 20)   /* 16 MiB, newline included */
/* Until its hello is accepted a peer is a stranger: a hello is tiny (a
 * 64-digit token, a name of at most 127 bytes, a host name), and a stranger
 * must not make the daemon hold more than a few KiB per connection. */
#define BF_WIRE_HELLO_MAX_FRAME ((size_t)4 << 10)
#define BF_WIRE_DEFAULT_SERVER "127.0.0.1:7070"
#define BF_TOKEN_HEX_LEN 64                     /* 32 random bytes as hex */
#define BF_TOKEN_MIN_HEX_LEN 32                 /* 128 bits: the least accepted */

/* ---- frame reader --------------------------------------------------------- */

/* Accumulates bytes and yields complete lines.  Owns its buffer. */
typedef struct bf_frame_reader {
    /* public */
    size_t max_frame;   /* the owner may raise it between feeds */
    /* private */
    char *buf;
    size_t start;   /* offset of the first byte not yet returned */
    size_t scan;    /* buf[start..scan) is known to hold no '\n' */
    size_t len;     /* end of the bytes held: buf[start..len) */
    size_t cap;
} bf_frame_reader;

void bf_frame_reader_init(bf_frame_reader *r, size_t max_frame);
void bf_frame_reader_free(bf_frame_reader *r);

/* Appends n bytes.  Returns 0 (running out of memory aborts: alloc.h). */
int bf_frame_reader_feed(bf_frame_reader *r, const char *data, size_t n);

/* Takes the next complete line.  Returns 1 with *line / *len set (without the
 * '\n'; the bytes stay valid until the next feed or next call), 0 when no
 * complete line is held yet, -1 when the pending frame exceeds max_frame
 * (the reader is then unusable: close the connection). */
int bf_frame_reader_next(bf_frame_reader *r, const char **line, size_t *len);

/* ---- messages ------------------------------------------------------------- */

/* Parses one frame into a JSON object with a string "type".  Returns a new
 * reference, or NULL with err saying what is wrong (invalid JSON with its
 * column, not an object, missing "type"). */
json_t *bf_wire_parse(const char *line, size_t len, bf_error *err);

/* Encodes msg as one frame (compact JSON + '\n').  Caller frees; *len (may be
 * NULL) gets the byte count.  NULL when msg cannot be encoded. */
char *bf_wire_encode(const json_t *msg, size_t *len);

/* The "type" of a parsed message ("" if absent). */
const char *bf_wire_type(const json_t *msg);

/* Builds {"type":"error","code":code,"message":...} plus "id" when id is not
 * NULL and file/line/field when err has them.  New reference. */
json_t *bf_wire_error(const char *code, const json_t *id, const bf_error *err,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ---- helpers for both ends ------------------------------------------------ */

/* Splits "HOST:PORT" (port 0..65535).  host must hold at least 256 bytes. */
int bf_wire_parse_host_port(const char *s, char *host, size_t host_cap,
                            int *port, bf_error *err);

/* Parses "HOST:PORT", HOST a numeric IPv4 or IPv6 address, into addr as
 * bind(2) takes it (the daemon's and the dashboard's --listen).  0, or -1
 * with err naming what is wrong. */
struct sockaddr_storage;
int bf_wire_parse_listen(const char *host_port, struct sockaddr_storage *addr,
                         bf_error *err);

/* The port of an IPv4 or IPv6 address. */
int bf_wire_addr_port(const struct sockaddr_storage *addr);

/* Reads a token file (hex, surrounding whitespace ignored) into
 * out[BF_TOKEN_HEX_LEN + 1].  Refused, with err naming the file and why: a
 * directory or other non-regular file, one that group or others may access
 * (as ssh refuses such a private key), anything but hex digits, fewer than
 * BF_TOKEN_MIN_HEX_LEN digits or more than cap - 1. */
int bf_wire_read_token(const char *path, char *out, size_t cap, bf_error *err);

#endif
