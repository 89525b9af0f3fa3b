-- How each call's reply ended (the API's finish_reason: stop, length,
-- content_filter, tool_calls; refusal for a refusal), and unpriced = 1 when
-- no price in llm.prices resolves to its model: its cost_usd of 0 is then
-- not known, not free.
ALTER TABLE llm_calls ADD COLUMN finish_reason String DEFAULT '';
ALTER TABLE llm_calls ADD COLUMN unpriced UInt8 DEFAULT 0;
