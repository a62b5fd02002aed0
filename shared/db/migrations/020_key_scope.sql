-- What a sub-key may use (issue 27, the origin's `POST /v1/apikey/change {apikey, scope}`):
-- `full` every API, `api` only the sending side (sending API, legacy v1, XML, verification,
-- sandbox), `rest-api` only the REST API. A primary key is always `full` (it manages the others).
ALTER TABLE api_keys ADD COLUMN scope text NOT NULL DEFAULT 'full' CHECK (scope IN ('full', 'api', 'rest-api'));
