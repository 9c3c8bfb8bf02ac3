/* The framing every daemon connection relies on: frames split across reads,
 * several frames in one read, the size limit, and message parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wire.h"

static void test_split_and_joined_frames(void **state)
{
    (void)state;
    bf_frame_reader r;
    bf_frame_reader_init(&r, 1024);
    const char *line;
    size_t len;
    assert_int_equal(bf_frame_reader_feed(&r, "{\"type\":\"a\"}\n{\"ty", 17), 0);
    assert_int_equal(bf_frame_reader_next(&r, &line, &len), 1);
    assert_int_equal(len, 12);
    assert_memory_equal(line, "{\"type\":\"a\"}", 12);
    assert_int_equal(bf_frame_reader_next(&r, &line, &len), 0);
    assert_int_equal(bf_frame_reader_feed(&r, "pe\":\"b\"}\n\n", 10), 0);
    assert_int_equal(bf_frame_reader_next(&r, &line, &len), 1);
    assert_int_equal(len, 12);
    assert_memory_equal(line, "{\"type\":\"b\"}", 12);
    /* An empty line is a frame too (the parser rejects it, not the reader). */
    assert_int_equal(bf_frame_reader_next(&r, &line, &len), 1);
    assert_int_equal(len, 0);
    assert_int_equal(bf_frame_reader_next(&r, &line, &len), 0);
    bf_frame_reader_free(&r);
}

static void test_byte_at_a_time(void **state)
{
    (void)state;
    bf_frame_reader r;
    bf_frame_reader_init(&r, 1024);
    const char *msg = "{\"type\":\"x\",\"n\":1}\n";
    const char *line;
    size_t len;
    int frames = 0;
    for (int round = 0; round < 100; round++)
        for (const char *p = msg; *p; p++) {
            assert_int_equal(bf_frame_reader_feed(&r, p, 1), 0);
            int got = bf_frame_reader_next(&r, &line, &len);
            assert_int_equal(got, *p == '\n');
            if (got) {
                assert_int_equal(len, strlen(msg) - 1);
                frames++;
            }
        }
    assert_int_equal(frames, 100);
    bf_frame_reader_free(&r);
}

static void test_oversized_frame(void **state)
{
    (void)state;
    bf_frame_reader r;
    bf_frame_reader_init(&r, 16);
    const char *line;
    size_t len;
    /* 15 bytes + newline = 16: exactly the limit is fine. */
    assert_int_equal(bf_frame_reader_feed(&r, "123456789012345\n", 16), 0);
    assert_int_equal(bf_frame_reader_next(&r, &line, &len), 1);
    assert_int_equal(len, 15);
    /* 16 bytes with no newline yet already exceed it. */
    assert_int_equal(bf_frame_reader_feed(&r, "1234567890123456", 16), 0);
    assert_int_equal(bf_frame_reader_next(&r, &line, &len), -1);
    bf_frame_reader_free(&r);

    bf_frame_reader_init(&r, 16);
    assert_int_equal(bf_frame_reader_feed(&r, "12345678901234567\n", 18), 0);
    assert_int_equal(bf_frame_reader_next(&r, &line, &len), -1);
    bf_frame_reader_free(&r);
}

static void test_parse(void **state)
{
    (void)state;
    bf_error err;
    json_t *m = bf_wire_parse("{\"type\":\"hello\",\"id\":3}", 23, &err);
    assert_non_null(m);
    assert_string_equal(bf_wire_type(m), "hello");
    json_decref(m);

    assert_null(bf_wire_parse("{\"type\":", 8, &err));
    assert_non_null(strstr(err.msg, "malformed JSON"));
    assert_null(bf_wire_parse("[1,2]", 5, &err));
    assert_non_null(strstr(err.msg, "object"));
    assert_null(bf_wire_parse("{\"type\":5}", 10, &err));
    assert_string_equal(err.field, "type");
    assert_null(bf_wire_parse("\xff\xfe", 2, &err));
}

static void test_encode_roundtrip(void **state)
{
    (void)state;
    json_t *m = json_pack("{s:s, s:s}", "type", "submit", "text",
                          "line one\nline two\n");
    size_t len;
    char *frame = bf_wire_encode(m, &len);
    assert_non_null(frame);
    /* Newlines inside strings are escaped: the only raw one ends the frame. */
    assert_ptr_equal(memchr(frame, '\n', len), frame + len - 1);
    bf_error err;
    json_t *back = bf_wire_parse(frame, len - 1, &err);
    assert_non_null(back);
    assert_true(json_equal(m, back));
    json_decref(back);
    json_decref(m);
    free(frame);
}

static void test_error_message(void **state)
{
    (void)state;
    bf_error e;
    bf_error_set(&e, "s.yaml", 7, "grid.rope", "unknown value 'x'");
    json_t *id = json_integer(9);
    json_t *m = bf_wire_error("invalid", id, &e, "%s", e.msg);
    assert_string_equal(bf_wire_type(m), "error");
    assert_string_equal(json_string_value(json_object_get(m, "code")),
                        "invalid");
    assert_int_equal(json_integer_value(json_object_get(m, "id")), 9);
    assert_int_equal(json_integer_value(json_object_get(m, "line")), 7);
    assert_string_equal(json_string_value(json_object_get(m, "field")),
                        "grid.rope");
    assert_non_null(strstr(json_string_value(json_object_get(m, "message")),
                           "s.yaml:7:"));
    json_decref(m);
    json_decref(id);
}

static void test_host_port(void **state)
{
    (void)state;
    char host[256];
    int port;
    bf_error err;
    assert_int_equal(bf_wire_parse_host_port("127.0.0.1:7070", host,
                                             sizeof host, &port, &err), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 7070);
    assert_int_equal(bf_wire_parse_host_port("::1:0", host, sizeof host,
                                             &port, &err), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 0);
    assert_int_equal(bf_wire_parse_host_port("localhost", host, sizeof host,
                                             &port, &err), -1);
    assert_int_equal(bf_wire_parse_host_port("h:70000", host, sizeof host,
                                             &port, &err), -1);
    assert_int_equal(bf_wire_parse_host_port("h:12x", host, sizeof host,
                                             &port, &err), -1);
    /* As bind(2) takes it: numeric addresses only. */
    struct sockaddr_storage a;
    assert_int_equal(bf_wire_parse_listen("10.1.2.3:8080", &a, &err), 0);
    assert_int_equal(a.ss_family, AF_INET);
    assert_int_equal(bf_wire_addr_port(&a), 8080);
    assert_int_equal(bf_wire_parse_listen("::1:0", &a, &err), 0);
    assert_int_equal(a.ss_family, AF_INET6);
    assert_int_equal(bf_wire_addr_port(&a), 0);
    assert_int_equal(bf_wire_parse_listen("localhost:80", &a, &err), -1);
    assert_non_null(strstr(err.msg, "not a numeric IPv4/IPv6 address"));
}

/* Writes text to a fresh file of this mode in a scratch directory and
 * reads it as a token file; returns bf_wire_read_token's result. */
static int read_token_text(const char *text, mode_t mode, char *token,
                           bf_error *err)
{
    char dir[] = "/tmp/bft-token-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/t", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    int rc = bf_wire_read_token(path, token, BF_TOKEN_HEX_LEN + 1, err);
    unlink(path);
    rmdir(dir);
    return rc;
}

/* A token file is a key: at least 128 bits of hex, private to its owner. */
static void test_token_files(void **state)
{
    (void)state;
    char token[BF_TOKEN_HEX_LEN + 1];
    bf_error err;
    const char *hex32 = "0123456789abcdef0123456789ABCDEF";
    char text[128];
    snprintf(text, sizeof text, "  %s\n", hex32);
    assert_int_equal(read_token_text(text, 0600, token, &err), 0);
    assert_string_equal(token, hex32);
    assert_int_equal(read_token_text(text, 0400, token, &err), 0);
    /* A token file holding "x" used to be accepted, and then "x"
     * authenticated. */
    assert_int_equal(read_token_text("x\n", 0600, token, &err), -1);
    assert_non_null(strstr(err.msg, "non-hex"));
    assert_int_equal(read_token_text("0123456789abcdef\n", 0600, token,
                                     &err), -1);
    assert_non_null(strstr(err.msg, "at least 128 bits"));
    snprintf(text, sizeof text, "%s zz\n", hex32);
    assert_int_equal(read_token_text(text, 0600, token, &err), -1);
    assert_non_null(strstr(err.msg, "nothing else"));
    /* Readable by group or world: refused, as ssh refuses such a key. */
    snprintf(text, sizeof text, "%s\n", hex32);
    assert_int_equal(read_token_text(text, 0666, token, &err), -1);
    assert_non_null(strstr(err.msg, "permissions 0666 are too open"));
    assert_int_equal(read_token_text(text, 0640, token, &err), -1);
    assert_non_null(strstr(err.msg, "too open"));
    /* A directory is named as one. */
    assert_int_equal(bf_wire_read_token("/tmp", token, sizeof token, &err),
                     -1);
    assert_non_null(strstr(err.msg, "is a directory"));
    assert_non_null(strstr(err.msg, "/tmp"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_joined_frames),
        cmocka_unit_test(test_byte_at_a_time),
        cmocka_unit_test(test_oversized_frame),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_encode_roundtrip),
        cmocka_unit_test(test_error_message),
        cmocka_unit_test(test_host_port),
        cmocka_unit_test(test_token_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
