package localsocket

import (
	"bufio"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadLineRefusesALongLineWholeAndReadsTheNext(t *testing.T) {
	long := strings.Repeat("x", 100)
	r := bufio.NewReaderSize(strings.NewReader("short\n"+long+"\n"+`{"type":"next"}`+"\n"), 16)

	line, size, err := readLine(r, 50)
	require.NoError(t, err)
	assert.Equal(t, "short", string(line))
	assert.Equal(t, 5, size)

	_, size, err = readLine(r, 50)
	require.NoError(t, err)
	assert.Equal(t, 100, size, "the whole long line is counted, to be refused")

	line, _, err = readLine(r, 50)
	require.NoError(t, err)
	assert.Equal(t, `{"type":"next"}`, string(line), "the next line is intact")

	_, _, err = readLine(r, 50)
	assert.ErrorIs(t, err, io.EOF)
}
