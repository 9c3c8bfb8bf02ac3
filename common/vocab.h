/* vocab: every task's tokens, their ids and names, and the vocabulary
 * size they make (docs/tasks.md).  Apart from the generators
 * (engine/tasks.c) because the daemon sizes a job's model by its
 * vocabulary (model_size) without generating an example. */
#ifndef BF_VOCAB_H
#define BF_VOCAB_H

#include "job_config.h"

/* Shared by every task; a task's own ids start at BF_TOK_FIRST. */
enum { BF_TOK_PAD = 0, BF_TOK_END = 1, BF_TOK_SEP = 2, BF_TOK_FIRST = 3 };

/* counter: ITER, item, MARK, then the digits 0..modulus-1 */
enum { BF_TOK_CNT_ITER = BF_TOK_FIRST, BF_TOK_CNT_ITEM, BF_TOK_CNT_MARK,
       BF_TOK_CNT_DIGIT0 };

/* modarith: ( ) + *, then the digits 0..modulus-1 */
enum { BF_TOK_MA_LPAREN = BF_TOK_FIRST, BF_TOK_MA_RPAREN, BF_TOK_MA_PLUS,
       BF_TOK_MA_TIMES, BF_TOK_MA_DIGIT0 };

/* code: BF_TOK_FIRST + a code symbol (code_corpus.h) */

/* dyck: bracket type i < dyck_k opens with FIRST + 2i, closes with the
 * next id. */
static inline int bf_tok_dyck_open(int type) { return BF_TOK_FIRST + 2 * type; }
static inline int bf_tok_dyck_close(int type)
{
    return BF_TOK_FIRST + 2 * type + 1;
}
static inline int bf_tok_dyck_type(int tok) { return (tok - BF_TOK_FIRST) / 2; }
static inline int bf_tok_dyck_is_open(int tok)
{
    return tok >= BF_TOK_FIRST && (tok - BF_TOK_FIRST) % 2 == 0;
}

/* Vocabulary size of the task named by cfg (depends on dyck_k / modulus). */
int bf_vocab_size(const bf_job_config *cfg);

/* Printable name of token `tok` (for debugging and docs), written to buf
 * (cap bytes) or a static string; "<bad:N>" for an id outside the task's
 * vocabulary. */
const char *bf_vocab_token_name(const bf_job_config *cfg, int tok, char *buf,
                                int cap);

#endif
