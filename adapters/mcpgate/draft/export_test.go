package draft

// EntityName is entityName, for the external tests.
var EntityName = entityName

// IntentName is intentName, for the external tests.
var IntentName = intentName
