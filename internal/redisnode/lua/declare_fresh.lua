-- Mark the server's current life as one that follows no loss of data (see
-- token.lua). Key: marker (the restart guard's). Returns the life's run id.
local life = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
redis.call('SET', marker, life)
return life
