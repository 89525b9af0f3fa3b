-- What a reasoning model and a prompt cache make of a call's tokens:
-- reasoning_tokens of tokens_out were spent thinking, cached_tokens of
-- tokens_in came from the endpoint's prompt cache; tokens_estimated = 1 when
-- the endpoint reported no usage and the tokens were counted by hpcq.
-- One column a statement: this server has no ADD COLUMN IF NOT EXISTS, so
-- Migrate takes "already exists" of an ADD COLUMN for done (a process that
-- started at the same time added it).
ALTER TABLE llm_calls ADD COLUMN reasoning_tokens UInt64 DEFAULT 0;
ALTER TABLE llm_calls ADD COLUMN cached_tokens UInt64 DEFAULT 0;
ALTER TABLE llm_calls ADD COLUMN tokens_estimated UInt8 DEFAULT 0;
