-- What a reasoning model and a prompt cache make of a call's tokens:
-- reasoning_tokens of tokens_out were spent thinking, cached_tokens of
-- tokens_in came from the endpoint's prompt cache; tokens_estimated = 1 when
-- the endpoint reported no usage and the tokens were counted by hpcq.
ALTER TABLE llm_calls ADD COLUMN reasoning_tokens UInt64 DEFAULT 0, ADD COLUMN cached_tokens UInt64 DEFAULT 0,
  ADD COLUMN tokens_estimated UInt8 DEFAULT 0;
