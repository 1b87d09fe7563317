# idiom: LabelEncoder on every string column and on the target, GradientBoosting; intended: invalid submission (the encoded 0/1 predictions are written instead of N/Y)
import pandas as pd
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.preprocessing import LabelEncoder

train = pd.read_csv('data/train.csv')
test = pd.read_csv('data/test.csv')

encoders = {}
for col in ['Gender', 'item', 'btype', 'situ', 'mode']:
    enc = LabelEncoder()
    enc.fit(pd.concat([train[col], test[col]]))
    train[col] = enc.transform(train[col])
    test[col] = enc.transform(test[col])
    encoders[col] = enc

target_encoder = LabelEncoder()
y = target_encoder.fit_transform(train['r2'])

features = ['Anger', 'Gender', 'item', 'btype', 'situ', 'mode']
model = GradientBoostingClassifier(n_estimators=200, max_depth=3, random_state=42)
model.fit(train[features], y)
print('train accuracy', model.score(train[features], y))

predictions = model.predict(test[features])
submission = pd.DataFrame({'id': test['id'], 'r2': predictions})
submission.to_csv('submission.csv', index=False)
