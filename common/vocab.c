#include "vocab.h"

#include <stdio.h>

#include "code_corpus.h"

int bf_vocab_size(const bf_job_config *cfg)
{
    switch (cfg->task) {
    case BF_TASK_DYCK:
        return BF_TOK_FIRST + 2 * cfg->dyck_k;
    case BF_TASK_COUNTER:
        return BF_TOK_CNT_DIGIT0 + cfg->modulus;
    case BF_TASK_MODARITH:
        return BF_TOK_MA_DIGIT0 + cfg->modulus;
    case BF_TASK_CODE:
        return BF_TOK_FIRST + BF_CODE_N_SYMBOLS;
    }
    return 0;
}

static const char *dyck_token_name(const bf_job_config *cfg, int tok,
                                   char *buf, int cap)
{
    static const char brackets[] = "()[]{}<>";
    int type = bf_tok_dyck_type(tok);
    if (type >= cfg->dyck_k)
        return NULL;
    if (type < 4)
        snprintf(buf, (size_t)cap, "%c", brackets[tok - BF_TOK_FIRST]);
    else
        snprintf(buf, (size_t)cap, bf_tok_dyck_is_open(tok) ? "(%d" : "%d)", type);
    return buf;
}

static const char *digit_name(const bf_job_config *cfg, int tok, int digit0,
                              char *buf, int cap)
{
    if (tok < digit0 || tok >= digit0 + cfg->modulus)
        return NULL;
    snprintf(buf, (size_t)cap, "%d", tok - digit0);
    return buf;
}

static const char *task_token_name(const bf_job_config *cfg, int tok,
                                   char *buf, int cap)
{
    static const char *const counter_names[] = {"ITER", "item", "MARK"};
    static const char *const modarith_names[] = {"(", ")", "+", "*"};
    switch (cfg->task) {
    case BF_TASK_DYCK:
        return dyck_token_name(cfg, tok, buf, cap);
    case BF_TASK_COUNTER:
        if (tok < BF_TOK_CNT_DIGIT0)
            return counter_names[tok - BF_TOK_FIRST];
        return digit_name(cfg, tok, BF_TOK_CNT_DIGIT0, buf, cap);
    case BF_TASK_MODARITH:
        if (tok < BF_TOK_MA_DIGIT0)
            return modarith_names[tok - BF_TOK_FIRST];
        return digit_name(cfg, tok, BF_TOK_MA_DIGIT0, buf, cap);
    case BF_TASK_CODE:
        return bf_code_symbol_name(tok - BF_TOK_FIRST);
    }
    return NULL;
}

const char *bf_vocab_token_name(const bf_job_config *cfg, int tok, char *buf,
                                int cap)
{
    static const char *const separators[] = {"|", "?", "=", "SEP"};
    const char *name = NULL;
    if (tok == BF_TOK_PAD)
        name = "PAD";
    else if (tok == BF_TOK_END)
        name = "END";
    else if (tok == BF_TOK_SEP)
        name = (unsigned)cfg->task < 4 ? separators[cfg->task] : "SEP";
    else if (tok > BF_TOK_SEP)
        name = task_token_name(cfg, tok, buf, cap);
    if (!name) {
        snprintf(buf, (size_t)cap, "<bad:%d>", tok);
        return buf;
    }
    if (name != buf)
        snprintf(buf, (size_t)cap, "%s", name);
    return buf;
}
