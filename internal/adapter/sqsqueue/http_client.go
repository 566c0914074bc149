package sqsqueue

import (
	"bytes"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// HTTPClient is the HTTP client every SQS call of expiryctl's goes
// through, its tests' and benchmark's too: the SDK's, with a deadline on
// an answer's headers (responseTimeout), and each request's body handed
// to net/http in memory (bufferedBody).
func HTTPClient() aws.HTTPClient {
	return bufferedBody{awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.ResponseHeaderTimeout = responseTimeout
	})}
}

// bufferedBody sends each request with its body as a bytes.Reader. The
// SDK hands net/http a body of its own type and closes it as soon as the
// answer's headers arrive (smithy-go's ClientHandler). net/http writes
// such a body after the headers, then reads it once more to check for
// bytes beyond its length; if the server answered in between, as a near
// server does, that read finds the body closed and net/http closes the
// connection under the answer being read. The SDK retries the call: a
// ReceiveMessage whose answer is lost leaves its messages hidden for the
// visibility timeout (a capture stalled 30 s in about one run of three
// against goaws), and a SendMessage may be sent twice. A body net/http
// knows to be in memory goes out with the headers, before the call can be
// answered.
type bufferedBody struct{ next aws.HTTPClient }

func (c bufferedBody) Do(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return c.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return c.next.Do(req)
}
