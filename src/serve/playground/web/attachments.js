// Files the user attaches, as the chat content parts the server accepts
// (docs/serve_openai.md): images as image_url data URLs, audio as input_audio (wav, mp3, flac,
// ogg, opus) or else an audio_url data URL, video as video_url data URLs.

import { bytesToBase64 } from './api.js';

const kTypesByExtension = {
    png: 'image/png', jpg: 'image/jpeg', jpeg: 'image/jpeg', gif: 'image/gif', bmp: 'image/bmp',
    webp: 'image/webp', wav: 'audio/wav', mp3: 'audio/mpeg', flac: 'audio/flac', ogg: 'audio/ogg',
    opus: 'audio/ogg', m4a: 'audio/mp4', mp4: 'video/mp4', webm: 'video/webm', mov: 'video/quicktime',
    mkv: 'video/x-matroska',
};

const kInputAudioFormats = {
    'audio/wav': 'wav', 'audio/x-wav': 'wav', 'audio/wave': 'wav', 'audio/vnd.wave': 'wav',
    'audio/mpeg': 'mp3', 'audio/mp3': 'mp3', 'audio/flac': 'flac', 'audio/x-flac': 'flac',
    'audio/ogg': 'ogg', 'audio/opus': 'opus',
};

function mimeOf(file) {
    if (file.type) return file.type;
    const extension = file.name.split('.').pop().toLowerCase();
    return kTypesByExtension[extension] ?? '';
}

// {name, kind: 'image'|'audio'|'video', mime, size, part, previewUrl}; throws for other files.
export async function makeAttachment(file) {
    const mime = mimeOf(file);
    const kind = mime.split('/')[0];
    if (!['image', 'audio', 'video'].includes(kind)) {
        throw new Error(`${file.name}: only images, audio and video can be attached`);
    }
    const data = bytesToBase64(new Uint8Array(await file.arrayBuffer()));
    const url = `data:${mime};base64,${data}`;
    let part;
    if (kind === 'image') {
        part = { type: 'image_url', image_url: { url } };
    } else if (kind === 'video') {
        part = { type: 'video_url', video_url: { url } };
    } else if (kInputAudioFormats[mime]) {
        part = { type: 'input_audio', input_audio: { data, format: kInputAudioFormats[mime] } };
    } else {
        part = { type: 'audio_url', audio_url: { url } };
    }
    return { name: file.name, kind, mime, size: file.size, part, previewUrl: URL.createObjectURL(file) };
}

export function formatBytes(size) {
    if (size < 1024) return `${size} B`;
    if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
    return `${(size / 1024 / 1024).toFixed(1)} MB`;
}

// A preview element for an attachment: a thumbnail, or a player for audio and video.
export function previewElement(attachment, { controls = false } = {}) {
    if (attachment.kind === 'image') {
        const image = document.createElement('img');
        image.src = attachment.previewUrl;
        image.alt = attachment.name;
        return image;
    }
    const media = document.createElement(attachment.kind);
    media.src = attachment.previewUrl;
    media.controls = controls;
    media.preload = 'metadata';
    return media;
}
