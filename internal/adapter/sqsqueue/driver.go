package sqsqueue

import (
	"github.com/expiryctl/expiryctl/config"
	"github.com/expiryctl/expiryctl/internal/adapter/driver"
)

// Driver is Amazon SQS as the core reaches it (package driver): letters
// name their queue by ARN, and SQS shows nobody consuming a queue.
var Driver driver.Driver = sqsDriver{}

type sqsDriver struct{}

func (sqsDriver) Traits() driver.Traits {
	return driver.Traits{System: "sqs", QueuePrefix: "arn:aws:sqs:", DefaultConnection: "sqs", Evidence: driver.NoConsumers}
}

func (sqsDriver) Words() driver.Words {
	return driver.Words{Title: "SQS", Server: "SQS", ServerLabel: "sqs", Doc: "docs/sqs.md",
		QueueForm: "arn:aws:sqs:REGION:ACCOUNT:NAME", ConsumersUnseen: "SQS shows no consumers of a queue, nor their versions",
		Replay: "An SQS letter goes back to the queue it came from: the x-original-queue its worker wrote (an ARN, " +
			"a URL or a name), else the source queue SQS's redrive names. A letter that names neither needs " +
			"--routing-key with the queue's ARN."}
}

func (sqsDriver) Config() config.Rules { return ConfigRules }

func (sqsDriver) Unreachable(err error) bool { return Unreachable(err) }
